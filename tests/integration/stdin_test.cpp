// procs/ID/stdin: a request with "stdin": "pipe" reads what is written to
// that file; stdin,eof closes the input. Driven with real bc, Python, wc,
// head and shells: answers come back through the log, a full pipe parks the
// write without holding a FUSE worker, an interrupt releases it, the input
// outlives a daemon killed with -9, and secrets written to it stay masked.
#include <signal.h>

#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using StdinTest = SbxfsTest;

/// A Python loop that answers each line it reads, and says when its input ends.
const char* const kEcho =
    R"J({"argv": ["python3", "-u", "-c", "import sys\nfor l in sys.stdin: print('got ' + l.strip())\nprint('eof')"], "stdin": "pipe"})J";

TEST_F(StdinTest, BcAnswersWhatIsWrittenToStdin) {
  const std::string id = start(R"({"argv": ["bc", "-q"], "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  const std::string in = p("procs/" + id + "/stdin");
  ASSERT_EQ(write_file(in, "2+3\n"), 0);
  EXPECT_TRUE(wait_until([&] { return log(id) == "5\n"; }, 10s)) << log(id);
  // Writers take turns: closing stdin does not end the input.
  ASSERT_EQ(write_file(in, "6*7\n"), 0);
  EXPECT_TRUE(wait_until([&] { return log(id) == "5\n42\n"; }, 10s)) << log(id);
  EXPECT_TRUE(status_json(id)["running"].get<bool>());
  // Follow the log while more goes in; the follower ends with the command.
  const std::string followed = dir_ + "/followed";
  const pid_t follower = spawn_bg("exec cat \"$MNT/procs/" + id + "/log,follow\"", followed);
  EXPECT_TRUE(wait_until([&] { return read_file(followed).data == "5\n42\n"; }, 10s));
  auto r = bash("printf '2^10\\nquit\\n' > \"$MNT/procs/" + id + "/stdin\"");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(wait_bg(follower, 10s), std::optional<int>(0));
  EXPECT_EQ(read_file(followed).data, "5\n42\n1024\n");
  json w = wait_json(id);
  EXPECT_EQ(w["proc"]["exitCode"], 0) << w.dump();
}

TEST_F(StdinTest, EofEndsTheInputAfterWhatWasWritten) {
  // `: > stdin,eof`: an open for writing and a close with nothing written.
  std::string id = start(R"({"cmd": "wc -c", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin"), "hello\n"), 0);
  // A temporary file renamed over stdin is one write of its content.
  auto r = bash("printf 'world\\n' > \"$MNT/procs/" + id + "/.in.tmp\" && mv \"$MNT/procs/" + id +
                "/.in.tmp\" \"$MNT/procs/" + id + "/stdin\"");
  ASSERT_EQ(r.code, 0) << r.err;
  r = bash(": > \"$MNT/procs/" + id + "/stdin,eof\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "12\n");

  // A shell's write to stdin,eof: it flushes once before it writes, and the
  // bytes still come before the end.
  id = start(R"({"cmd": "wc -c", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin"), "hello\n"), 0);
  r = bash("printf 'abc' > \"$MNT/procs/" + id + "/stdin,eof\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "9\n");

  // A command that runs on after its input ended: later writes are EPIPE, a
  // second close is no error.
  id = start(R"({"cmd": "cat; echo input-ended; exec sleep 30", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin,eof"), "last\n"), 0);
  EXPECT_TRUE(wait_until([&] { return log(id) == "last\ninput-ended\n"; }, 10s)) << log(id);
  EXPECT_EQ(write_file(p("procs/" + id + "/stdin"), "more\n"), EPIPE);
  EXPECT_EQ(errors().back()["path"], "procs/" + id + "/stdin");
  EXPECT_EQ(errors().back()["errno"], "EPIPE");
  EXPECT_NE(errors().back()["error"].get<std::string>().find("closed"), std::string::npos) << errors().back();
  EXPECT_EQ(write_file(p("procs/" + id + "/stdin,eof"), ""), 0);
  EXPECT_TRUE(status_json(id)["running"].get<bool>());
}

TEST_F(StdinTest, AChildsCloseOfAnInheritedEofDescriptorLeavesTheInputOpen) {
  // A child closes its copy of the script's descriptor when it exits
  // (/bin/echo wrote through it, /bin/true did not), and Python's child at
  // its exec (close-on-exec): neither is the writer's close.
  std::string id = start(R"({"cmd": "cat", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  auto r = bash("exec 4>\"$MNT/procs/$ID/stdin,eof\"; echo a >&4; /bin/true; /bin/echo b >&4; echo c >&4; exec 4>&-",
                20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "a\nb\nc\n");

  id = start(R"({"cmd": "cat", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  r = python(
      "import os, subprocess\n"
      "f = open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/stdin,eof', 'w', buffering=1)\n"
      "f.write('a\\n'); subprocess.run(['/bin/true'], check=True); f.write('b\\n'); f.close()\n",
      20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "a\nb\n");
}

TEST_F(StdinTest, ALargeWriteIntoASlowReaderLeavesTheMountAnswering) {
  // The reader takes nothing until the gate exists, then 64 KiB every 20 ms:
  // the 4 MiB write is held for as long as the test needs.
  const std::string gate = dir_ + "/reader.go";
  const std::string id = start(
      R"J({"argv": ["python3", "-c", "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)\nn = 0\nwhile True:\n    b = sys.stdin.buffer.read1(65536)\n    if not b: break\n    n += len(b)\n    time.sleep(0.02)\nprint(n)", ")J" +
      gate + R"J("], "stdin": "pipe"})J");
  ASSERT_FALSE(id.empty());
  const std::string done = dir_ + "/writer.done";
  const pid_t writer = spawn_bg("head -c 4194304 /dev/zero > \"$MNT/procs/" + id +
                                "/stdin\" && : > \"$MNT/procs/" + id + "/stdin,eof\" && touch \"" + done + "\"");
  // Meanwhile the rest of the tree answers (a worker held by the write
  // would hold these until the gate opens).
  for (int i = 0; i < 5; ++i) {
    auto r = run("cat \"$MNT/status.json\" > /dev/null && ls \"$MNT/procs/" + id + "\" >/dev/null", 10);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_LT(r.seconds, 5.0);
  }
  EXPECT_NE(stat_errno(done), 0) << "the write did not wait for the reader";
  ASSERT_EQ(write_file(gate, "", O_WRONLY | O_CREAT | O_TRUNC), 0);
  EXPECT_EQ(wait_bg(writer, 30s), std::optional<int>(0));
  EXPECT_EQ(wait_json(id, 20)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "4194304\n");
}

// A rename holds its folders locked until it is answered: one onto stdin
// never waits for the command to read. All of it goes in at once (the pipe
// grows to hold it), or nothing, with EAGAIN or E2BIG.
TEST_F(StdinTest, ARenameOntoStdinNeverWaitsForTheCommand) {
  const std::string gate = dir_ + "/reader.go";
  const std::string id =
      start(R"({"cmd": "while [ ! -e \")" + gate + R"(\" ]; do sleep 0.02; done; wc -c", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  const long most = std::stol(read_file("/proc/sys/fs/pipe-max-size").data);
  auto r = run_argv({"python3", "-c", R"(
import errno, os, sys
d, most = sys.argv[1], int(sys.argv[2])
def rename(size):
    with open(d + '/.in.tmp', 'wb') as f:
        f.write(b'x' * size)
    try:
        os.replace(d + '/.in.tmp', d + '/stdin')
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
print(rename(100000), rename(most + 1), rename(most - 50000))
os.stat(d + '/status.json')
)", p("procs/" + id), std::to_string(most)}, 10);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ok E2BIG EAGAIN\n");
  const json errs = errors();
  ASSERT_GE(errs.size(), 2u);
  EXPECT_EQ(errs[errs.size() - 2]["errno"], "E2BIG") << errs;
  EXPECT_EQ(errs.back()["errno"], "EAGAIN") << errs;
  EXPECT_EQ(errs.back()["path"], "procs/" + id + "/stdin");
  ASSERT_EQ(write_file(gate, "", O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin,eof"), ""), 0);
  EXPECT_EQ(wait_json(id, 20)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "100000\n") << "a refused rename puts nothing in";
}

class StdinFewWorkersTest : public SbxfsTest {
 protected:
  StdinFewWorkersTest() { daemon_options_ = {"-o", "max_threads=2"}; }
};

TEST_F(StdinFewWorkersTest, BlockedWritesHoldNoWorkerAndAnInterruptReleasesThem) {
  // Three commands that never read: each writer fills its pipe and waits.
  std::vector<std::string> ids;
  std::vector<pid_t> writers;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(start(R"({"cmd": "exec sleep 60", "stdin": "pipe"})"));
    ASSERT_FALSE(ids.back().empty());
    writers.push_back(spawn_bg("head -c 1048576 /dev/zero > \"$MNT/procs/" + ids.back() + "/stdin\""));
  }
  // Two workers, three writes waiting: the tree still answers.
  for (int i = 0; i < 3; ++i) {
    auto r = run("cat \"$MNT/status.json\" >/dev/null && cat \"$MNT/procs/" + ids[0] + "/status.json\" >/dev/null", 5);
    EXPECT_EQ(r.code, 0) << r.err;
  }
  for (pid_t w : writers) EXPECT_TRUE(pid_alive(w));
  for (pid_t w : writers) ::kill(-w, SIGTERM);
  for (pid_t w : writers) EXPECT_TRUE(wait_bg(w, 5s).has_value()) << "a blocked write was not released";
  // `timeout` interrupts a write blocked on the full pipe at once.
  auto r = run("timeout 2 sh -c 'head -c 1048576 /dev/zero > \"$MNT/procs/" + ids[0] + "/stdin\"'", 10);
  EXPECT_EQ(r.code, 124) << r.err;
  EXPECT_LT(r.seconds, 4.0);
  EXPECT_EQ(status_json(ids[0])["running"], true);
}

TEST_F(StdinTest, ANonBlockingWriterGetsWhatFittedThenEagain) {
  const std::string id = start(R"({"cmd": "exec sleep 60", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  // Python's os.write on an O_NONBLOCK descriptor: a short count once the
  // pipe fills, then BlockingIOError (EAGAIN); nothing waits.
  auto r = run(R"(python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_NONBLOCK)
n = os.write(fd, b"x" * 1048576)
assert 0 < n < 1048576, n
try:
    os.write(fd, b"y" * 4096)
    print("no EAGAIN")
except BlockingIOError:
    print("EAGAIN after", n)
' "$MNT/procs/$ID/stdin")", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("EAGAIN after ", 0), 0u) << r.out;
  EXPECT_LT(r.seconds, 5.0);
  EXPECT_EQ(status_json(id)["running"], true);
}

TEST_F(StdinTest, WritesToACommandThatReadsNoPipeAreEpipe) {
  // Ended.
  std::string id = start(R"({"cmd": "true", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  auto r = bash("echo 1 > \"$MNT/procs/" + id + "/stdin\"");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("Broken pipe"), std::string::npos) << r.err;
  EXPECT_EQ(errors().back()["errno"], "EPIPE");
  EXPECT_NE(errors().back()["error"].get<std::string>().find("ended"), std::string::npos) << errors().back();
  // Running, but started without "stdin": "pipe": its stdin is /dev/null.
  id = start(R"({"cmd": "exec sleep 30"})");
  ASSERT_FALSE(id.empty());
  const std::vector<std::string> files = list_dir(p("procs/" + id));
  EXPECT_NE(std::find(files.begin(), files.end(), "stdin"), files.end());
  EXPECT_EQ(write_file(p("procs/" + id + "/stdin"), "x\n"), EPIPE);
  EXPECT_NE(errors().back()["error"].get<std::string>().find("\"stdin\": \"pipe\""), std::string::npos)
      << errors().back();
  EXPECT_EQ(write_file(p("procs/" + id + "/stdin,eof"), ""), EPIPE);
  // A command that closed its stdin but runs on.
  id = start(R"({"cmd": "exec 0<&-; echo closed; exec sleep 30", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id) == "closed\n"; }, 10s));
  EXPECT_EQ(write_file(p("procs/" + id + "/stdin"), "x\n"), EPIPE);
  // It is write-only.
  EXPECT_EQ(read_file(p("procs/" + id + "/stdin")).err, EACCES);
}

TEST_F(StdinTest, ABufferedWritersRetryOfARefusedWriteIsOneLine) {
  std::string id = start(R"({"cmd": "true", "stdin": "pipe"})");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  const std::size_t before = errors().size();
  RunResult py = python_write("procs/" + id + "/stdin", "1+1\n");
  EXPECT_NE(py.err.find("Broken pipe"), std::string::npos) << py.err;
  std::vector<json> errs = errors();
  ASSERT_EQ(errs.size(), before + 1) << "one refusal, one line";
  EXPECT_EQ(errs.back()["errno"], "EPIPE");
}

TEST_F(StdinTest, TheInputOutlivesADaemonKilledWithSigkill) {
  const std::string id = start(kEcho);
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin"), "one\n"), 0);
  ASSERT_TRUE(wait_until([&] { return log(id) == "got one\n"; }, 10s)) << log(id);
  ASSERT_TRUE(restart_daemon());
  // The daemon's death closed no input: the command did not read EOF.
  EXPECT_TRUE(status_json(id)["running"].get<bool>());
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin"), "two\n"), 0);
  EXPECT_TRUE(wait_until([&] { return log(id) == "got one\ngot two\n"; }, 10s)) << log(id);
  // Twice: a daemon that had never opened the pipe.
  ASSERT_TRUE(restart_daemon());
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin,eof"), "three\n"), 0);
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "got one\ngot two\ngot three\neof\n");
}

TEST_F(StdinTest, SecretsWrittenToStdinAreMaskedInEveryView) {
  const std::string secret = "hunter2-Stdin-Secret";
  const std::string id = start(R"({"cmd": "cat; sleep 0.2", "stdin": "pipe", "secretEnv": {"TOKEN": ")" + secret +
                               R"("}})");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin"), "key=" + secret + "\n"), 0);
  ASSERT_TRUE(wait_until([&] { return log(id).find("key=") != std::string::npos; }, 10s));
  ASSERT_EQ(write_file(p("procs/" + id + "/stdin,eof"), ""), 0);
  wait_ended(id);
  // Refused writes carry the secret too: errors shows only their size.
  EXPECT_EQ(write_file(p("procs/" + id + "/stdin"), secret), EPIPE);
  for (const std::string& rel : {"procs/" + id + "/log", "procs/" + id + "/stdout", "procs/" + id + "/tail",
                                "procs/" + id + "/events", "procs/" + id + "/output", "procs/" + id + "/wait",
                                "procs/" + id + "/status.json,tailBytes=200", "logs/" + id + ".log",
                                std::string("status.json,all,tailBytes=200"), std::string("errors")}) {
    const std::string body = file(rel);
    EXPECT_EQ(body.find("hunter2"), std::string::npos) << rel << ": " << body;
  }
  EXPECT_EQ(file("procs/" + id + "/log"), "key=" + std::string(secret.size(), '*') + "\n");
  EXPECT_EQ(daemon_log().find("hunter2"), std::string::npos);
}

TEST_F(StdinTest, BadStdinValuesAndKeysAreEinval) {
  for (const char* req : {R"({"cmd": "true", "stdin": "file"})", R"({"cmd": "true", "stdin": true})"}) {
    SCOPED_TRACE(req);
    auto r = bash("printf '%s\\n' '" + std::string(req) + "' > \"$MNT/cmd\"");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << r.err;
    EXPECT_EQ(errors().back()["errno"], "EINVAL");
    EXPECT_NE(errors().back()["error"].get<std::string>().find("'stdin' must be \"null\" or \"pipe\""),
              std::string::npos)
        << errors().back();
  }
  // "null" is the default, spelled out.
  const std::string id = start(R"({"cmd": "exec sleep 30", "stdin": "null"})");
  ASSERT_FALSE(id.empty());
  for (const char* name : {"stdin,eof=1", "stdin,bogus", "stdin,eof,eof"}) {
    EXPECT_EQ(write_file(p("procs/" + id + "/" + name), "x"), EINVAL) << name;
    EXPECT_EQ(errors().back()["errno"], "EINVAL") << name;
  }
}

}  // namespace
}  // namespace sbxit
