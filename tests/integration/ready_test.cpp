// procs/ID/ready and the ready keys of a request: conditions through the
// tree, the blocking read and its answers, poll() on many files at once.
#include <string>

#include "../common/free_port.hpp"
#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using ReadyTest = SbxfsTest;

using sbxtest_common::free_port;

TEST_F(ReadyTest, DevServerFromTheReadme) {
  const int port = free_port();
  std::string id = start("exec python3 -m http.server " + std::to_string(port) + " --bind 127.0.0.1");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(write_file(p("procs/" + id + "/ready"), "http " + std::to_string(port) + " /\n"), 0);
  json r = parse_json(run("cat \"$MNT/procs/" + id + "/ready\"", 20).out);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["ready"], true);
  EXPECT_TRUE(is_iso_time(r["readyAt"]));
  EXPECT_EQ(r["proc"]["bgId"], id);
  EXPECT_EQ(r["proc"]["running"], true);
  json st = status_json(id);
  EXPECT_EQ(st["ready"], true);
  EXPECT_TRUE(is_iso_time(st["readyAt"]));
  // The server really answers.
  EXPECT_EQ(run_argv({"python3", "-c", "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:" +
                                           std::to_string(port) + "/')"}).code, 0);
}

TEST_F(ReadyTest, LogConditionGivenAtStartCountsEarlierLines) {
  std::string id = start(R"({"cmd": "echo 'db: listening'; sleep 30", "readyLog": "listening$"})");
  ASSERT_FALSE(id.empty());
  json r = parse_json(run("cat \"$MNT/procs/" + id + "/ready\"", 10).out);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["ready"], true);
}

TEST_F(ReadyTest, PortOpenedLaterUnblocksTheRead) {
  const int port = free_port();
  const std::string go = dir_ + "/go";
  std::string id = start("while [ ! -e '" + go + "' ]; do sleep 0.05; done; exec python3 -c 'import socket,time\n"
                         "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                         "s.bind((\"127.0.0.1\", " + std::to_string(port) + ")); s.listen(); time.sleep(30)'");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(write_file(p("procs/" + id + "/ready"), "port " + std::to_string(port)), 0);
  const std::string out = dir_ + "/ready.out";
  pid_t reader = spawn_bg("exec cat \"$MNT/procs/" + id + "/ready\"", out);
  EXPECT_FALSE(wait_until([&] { return !read_file(out).data.empty(); }, 400ms)) << "answered before the port opened";
  ASSERT_EQ(write_file(go, "x", O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_TRUE(wait_until([&] { return parse_json(read_file(out).data).is_object(); }, 10s));
  EXPECT_EQ(parse_json(read_file(out).data)["ready"], true);
  EXPECT_EQ(wait_bg(reader, 5s), 0);
}

TEST_F(ReadyTest, EndedFirstAnswersNotReadyWithTheProc) {
  std::string id = start(R"({"cmd": "echo never; exit 5", "readyLog": "ready"})");
  ASSERT_FALSE(id.empty());
  json r = parse_json(run("cat \"$MNT/procs/" + id + "/ready\"", 10).out);
  ASSERT_TRUE(r.is_object());
  EXPECT_EQ(r["ready"], false);
  EXPECT_EQ(r["readyAt"], nullptr);
  EXPECT_EQ(r["proc"]["exitCode"], 5);
  EXPECT_EQ(r["proc"]["running"], false);
  EXPECT_EQ(r["stillRunning"], false);
}

TEST_F(ReadyTest, BadConditionsAreEinvalWithALineInErrors) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  for (const char* bad : {"port 0", "port 99999", "log (unclosed", "listen 80", "http 80 nopath"}) {
    EXPECT_EQ(write_file(p("procs/" + id + "/ready"), std::string(bad) + "\n"), EINVAL) << bad;
  }
  auto errs = errors();
  ASSERT_GE(errs.size(), 5u);
  EXPECT_EQ(errs.back()["errno"], "EINVAL");
  EXPECT_EQ(errs.back()["path"], "procs/" + id + "/ready");
  EXPECT_NE(errs.back()["error"].get<std::string>().find("path"), std::string::npos) << errs.back().dump();
  // A bad key in a start request is refused too, and nothing starts.
  const auto before = procs();
  auto r = bash("echo '{\"cmd\": \"true\", \"readyPort\": \"80\"}' > \"$MNT/cmd\"");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << r.err;
  EXPECT_EQ(procs(), before);
}

TEST_F(ReadyTest, ConditionReplacedByAWrite) {
  std::string id = start(R"({"cmd": "echo alpha; sleep 30", "readyLog": "never-printed"})");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(status_json(id)["readyWhen"], "log never-printed");
  ASSERT_EQ(write_file(p("procs/" + id + "/ready"), R"({"readyLog": "^alpha$"})"), 0);
  json r = parse_json(run("cat \"$MNT/procs/" + id + "/ready\"", 10).out);
  EXPECT_EQ(r["ready"], true);
  EXPECT_EQ(status_json(id)["readyWhen"], "log ^alpha$");
}

TEST_F(ReadyTest, AConditionWrittenIsCheckedBeforeTheWriteReturns) {
  for (int i = 0; i < 5; ++i) {
    std::string id = start("echo foo-line; exec sleep 30");
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(wait_until([&] { return log(id) == "foo-line\n"; }, 10s));
    ASSERT_EQ(run("echo 'log ^foo' > \"$MNT/procs/$ID/ready\"", 10, {{"ID", id}}).code, 0);
    const json s = status_json(id);
    EXPECT_EQ(s["ready"], true) << "the log held the line when the write returned: " << s.dump();
    EXPECT_EQ(s["readyWhen"], "log ^foo");
    ASSERT_EQ(write_file(p("procs/" + id + "/stop"), "\n"), 0);
  }
}

TEST_F(ReadyTest, InterruptedReadIsReleasedAtOnce) {
  std::string id = start(R"({"cmd": "sleep 30", "readyLog": "never"})");
  ASSERT_FALSE(id.empty());
  auto r = run("timeout 1 cat \"$MNT/procs/" + id + "/ready\"", 10);
  EXPECT_EQ(r.code, 124);
  EXPECT_LT(r.seconds, 3.0);
  EXPECT_EQ(status_json(id)["running"], true);
}

// An event loop waiting on many commands at once: select.poll() on the wait
// and ready files of three commands; each becomes readable when its answer is.
TEST_F(ReadyTest, PythonPollOnWaitAndReadyOfSeveralCommands) {
  const std::string gate = dir_ + "/gate";
  std::string a = start(R"({"cmd": "echo up; sleep 30", "readyLog": "^up$"})");
  std::string b = start("while [ ! -e '" + gate + "' ]; do sleep 0.05; done; exit 2");
  std::string c = start(R"({"cmd": "sleep 30", "readyLog": "never"})");
  ASSERT_FALSE(a.empty() || b.empty() || c.empty());
  auto r = python(R"PY(
import os, select, json, sys
M = os.environ['MNT']
a, b, c, gate = os.environ['A'], os.environ['B'], os.environ['C'], os.environ['GATE']
files = {os.open(f'{M}/procs/{a}/ready', os.O_RDONLY): 'a-ready',
         os.open(f'{M}/procs/{b}/wait', os.O_RDONLY): 'b-wait',
         os.open(f'{M}/procs/{c}/ready', os.O_RDONLY): 'c-ready'}
p = select.poll()
for fd in files: p.register(fd, select.POLLIN)
def readable(ms):
    return sorted(files[fd] for fd, ev in p.poll(ms) if ev & select.POLLIN)
first = readable(5000)
print('first', first)
assert first == ['a-ready'], first
open(gate, 'w').close()
import time
deadline = time.time() + 10
seen = set(first)
while 'b-wait' not in seen and time.time() < deadline:
    seen.update(readable(1000))
assert 'b-wait' in seen and 'c-ready' not in seen, seen
for fd, name in files.items():
    if name == 'c-ready': continue
    ans = json.loads(os.read(fd, 1 << 20))
    if name == 'a-ready': assert ans['ready'] is True, ans
    if name == 'b-wait': assert ans['proc']['exitCode'] == 2, ans
print('ok')
)PY", 30, {{"A", a}, {"B", b}, {"C", c}, {"GATE", gate}});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace sbxit

namespace sbxit {
namespace {

TEST_F(ReadyTest, NoConditionIsEinvalWithTheReason) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  auto r = python("import os\n"
                  "fd = os.open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/ready', os.O_RDONLY)\n"
                  "try:\n    os.read(fd, 4096)\nexcept OSError as e:\n    print(e.errno)\n",
                  10, {{"ID", id}});
  EXPECT_EQ(r.out, std::to_string(EINVAL) + "\n") << r.err;
  auto errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_NE(errs.back()["error"].get<std::string>().find("no ready condition"), std::string::npos) << errs.back().dump();
  // Read through a name with keys, the line names it.
  EXPECT_NE(run("cat \"$MNT/procs/$ID/ready,tailBytes=7\"", 10, {{"ID", id}}).code, 0);
  EXPECT_EQ(errors().back()["path"], "procs/" + id + "/ready,tailBytes=7") << errors().back().dump();
  EXPECT_EQ(errors().back()["request"], "ready,tailBytes=7");
}

TEST_F(ReadyTest, NonBlockingReadBeforeTheAnswerIsEagain) {
  std::string a = start(R"({"cmd": "sleep 30", "readyLog": "never"})");
  ASSERT_FALSE(a.empty());
  auto r = python("import os\n"
                  "M, A = os.environ['MNT'], os.environ['ID']\n"
                  "out = []\n"
                  "for f in ('ready', 'wait'):\n"
                  "    fd = os.open(f'{M}/procs/{A}/{f}', os.O_RDONLY | os.O_NONBLOCK)\n"
                  "    try:\n        os.read(fd, 4096); out.append('data')\n"
                  "    except BlockingIOError:\n        out.append('EAGAIN')\n"
                  "print(' '.join(out))\n",
                  10, {{"ID", a}});
  EXPECT_EQ(r.out, "EAGAIN EAGAIN\n") << r.err;
}

}  // namespace
}  // namespace sbxit
