// The root `cmd` file: plain-text and JSON requests, how shells write them,
// the read-back of the bgId, and every request key.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using CmdTest = SbxfsTest;

TEST_F(CmdTest, ReadmeIsReadablePlainText) {
  auto r = read_file(p("README"));
  ASSERT_EQ(r.err, 0) << errno_name(r.err);
  EXPECT_GT(r.data.size(), 200u);
  EXPECT_NE(r.data.find("cmd"), std::string::npos);
  EXPECT_NE(r.data.find("procs"), std::string::npos);
  EXPECT_NE(r.data.find("wait"), std::string::npos);
  struct stat st;
  ASSERT_EQ(::stat(p("README").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  auto c = run("cat \"$MNT/README\" | wc -c");
  EXPECT_EQ(c.code, 0);
  EXPECT_EQ(std::stoul(c.out), r.data.size()) << "cat and read(2) disagree on README";
}

TEST_F(CmdTest, RootListing) {
  auto names = list_dir(mnt_);
  for (const char* want : {"README", "cmd", "status.json", "errors", "procs", "logs"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want << " missing from the root";
  struct stat st;
  ASSERT_EQ(::stat(p("cmd").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0666, 0666u);
  ASSERT_EQ(::stat(p("procs").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  ASSERT_EQ(::stat(p("logs").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST_F(CmdTest, ReadingCmdWithoutWriteGivesUsage) {
  auto r = read_file(p("cmd"));
  ASSERT_EQ(r.err, 0) << errno_name(r.err);
  EXPECT_FALSE(r.data.empty()) << "a read of cmd with no write should show a short usage text";
  EXPECT_FALSE(is_auto_id(r.data.substr(0, r.data.find('\n'))));
  EXPECT_TRUE(procs().empty()) << "reading cmd must not start anything";
}

TEST_F(CmdTest, EchoStartsAShellCommand) {
  auto r = run("echo 'echo hello' > \"$MNT/cmd\"");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_TRUE(is_auto_id(ids[0])) << ids[0];
  auto w = wait_json(ids[0]);
  ASSERT_TRUE(w.is_object());
  EXPECT_EQ(w["proc"]["exitCode"], 0);
  EXPECT_EQ(log(ids[0]), "hello\n");
  auto s = status_json(ids[0]);
  EXPECT_EQ(s["cmd"], "echo hello") << "the trailing newline is dropped";
  EXPECT_EQ(s["argv"], json({"/bin/sh", "-c", "echo hello"}));
  EXPECT_EQ(read_file(p("procs/" + ids[0] + "/cmd")).data, "echo hello\n");
}

TEST_F(CmdTest, ReadBackGivesTheBgId) {
  auto r = run(R"(exec 3<>"$MNT/cmd"; echo true >&3; read -r id <&3; echo "$id")");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  EXPECT_TRUE(is_auto_id(id)) << "read-back gave: " << r.out;
  EXPECT_EQ(procs(), std::vector<std::string>{id});
  EXPECT_EQ(status_json(id)["bgId"], id);
}

TEST_F(CmdTest, SuccessfulWriteMeansStarted) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  // No waiting: the write returned after exec, so the record is complete now.
  auto s = status_json(id);
  EXPECT_EQ(s["running"], true);
  EXPECT_EQ(s["state"], "running");
  ASSERT_TRUE(s["pid"].is_number_integer());
  EXPECT_TRUE(pid_alive(s["pid"].get<pid_t>()));
  EXPECT_TRUE(is_iso_time(s["startedAt"])) << s["startedAt"];
}

TEST_F(CmdTest, AutoIdsSortInStartOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(start("true"));
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i - 1], ids[i]);
  EXPECT_EQ(procs(), ids) << "procs/ lists in bgId (= start) order";
  auto ls = run("ls \"$MNT/procs\"");
  std::string want;
  for (auto& id : ids) want += id + "\n";
  EXPECT_EQ(ls.out, want);
}

TEST_F(CmdTest, SplitPrintfsAreOneCommand) {
  auto r = run(R"({ printf 'echo '; printf 'hel'; printf 'lo\n'; } > "$MNT/cmd")");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u) << "three writes on one open file are one request";
  wait_json(ids[0]);
  EXPECT_EQ(log(ids[0]), "hello\n");
}

TEST_F(CmdTest, SplitJsonWritesAreOneRequest) {
  auto r = run(R"({ printf '{"cmd":'; printf ' "echo spl'; printf 'it"}\n'; } > "$MNT/cmd")");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  wait_json(ids[0]);
  EXPECT_EQ(log(ids[0]), "split\n");
}

TEST_F(CmdTest, BlanksWrittenAfterARequestAreNoRequestAndNoError) {
  // dd bs=1 writes byte by byte: the JSON is whole at its '}', its newline
  // comes in a write of its own; a printf of two newlines likewise.
  auto r = run(R"(printf '{"cmd": "echo one"}
' | dd bs=1 of="$MNT/cmd" 2>/dev/null && )"
               R"({ printf '{"cmd": "echo two"}
'; printf '

'; } > "$MNT/cmd")");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 2u);
  for (const std::string& id : ids) wait_json(id);
  EXPECT_EQ(log(ids[0]) + log(ids[1]), "one\ntwo\n");
  EXPECT_TRUE(errors().empty()) << errors().front().dump();
}

TEST_F(CmdTest, BlanksAloneAreSkippedAndARequestMayFollowThem) {
  // A blank line before a JSON request written 3 bytes at a time: its
  // first write is blanks alone, skipped; the request after it starts.
  auto r = run(R"(printf '  \n{"cmd":"echo x"}\n' | dd of="$MNT/cmd" bs=3 2>&1)");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::vector<std::string> ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  wait_ended(ids[0]);
  EXPECT_EQ(log(ids[0]), "x\n");
  // Blanks alone, with a newline or without: success, nothing started.
  r = bash(R"(echo > "$MNT/cmd" && printf '   ' > "$MNT/cmd" && printf ' \t\n\n' > "$MNT/cmd")");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(procs().size(), 1u);
  EXPECT_TRUE(errors().empty()) << errors().front().dump();
  // Nothing written at all is still an empty request.
  r = python("import os; open(os.environ['MNT'] + '/cmd', 'w').close()");
  EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << r.err;
  std::vector<json> errs = errors();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0]["errno"], "EINVAL");
  EXPECT_EQ(procs().size(), 1u);
}

TEST_F(CmdTest, AppendRedirectionWorks) {
  auto r = run("echo 'echo appended' >> \"$MNT/cmd\"");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  wait_json(ids[0]);
  EXPECT_EQ(log(ids[0]), "appended\n");
}

TEST_F(CmdTest, NoTrailingNewlineRunsAtClose) {
  auto r = run("printf 'echo unterminated' > \"$MNT/cmd\"");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u) << "a request still buffered at close is executed at flush";
  wait_json(ids[0]);
  EXPECT_EQ(log(ids[0]), "unterminated\n");
}

TEST_F(CmdTest, MultiLineScriptInOneWriteIsOneCommand) {
  // Python: exactly one write(2) holding three lines.
  auto r = python(R"(
import os
fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
os.write(fd, b'echo a\necho b\nexit 3\n')
print(os.read(fd, 100).decode(), end='')
os.close(fd)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  EXPECT_TRUE(is_auto_id(id)) << r.out;
  ASSERT_EQ(procs().size(), 1u);
  auto w = wait_json(id);
  EXPECT_EQ(w["proc"]["exitCode"], 3);
  EXPECT_EQ(log(id), "a\nb\n");
  EXPECT_EQ(read_file(p("procs/" + id + "/cmd")).data, "echo a\necho b\nexit 3\n");
}

// Blanks written after a request (its newline apart, `dd bs=1`): the
// writer's position moved past them, and the answer begins there.
TEST_F(CmdTest, TheAnswerBeginsAfterBlanksWrittenAfterTheRequest) {
  auto r = python(R"(
import os
for parts in ([b'{"cmd": "true"}', b'\n'], [b'{"cmd": "true"}', b'\n\n\n'], [b'true\n', b'\n']):
    fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
    for part in parts:
        os.write(fd, part)
    print(os.read(fd, 100).decode(), end='')
    os.close(fd)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> ids = procs();
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(r.out, ids[0] + "\n" + ids[1] + "\n" + ids[2] + "\n");
}

TEST_F(CmdTest, HeredocScriptIsOneCommand) {
  auto r = run(R"(cat > "$MNT/cmd" <<'EOF'
x=1
while [ $x -le 3 ]; do echo "line $x"; x=$((x + 1)); done
EOF
)");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  wait_json(ids[0]);
  EXPECT_EQ(log(ids[0]), "line 1\nline 2\nline 3\n");
}

TEST_F(CmdTest, BashBuiltinsWriteEachLineApartAndJsonKeepsAScriptWhole) {
  // bash's printf writes each line as its own write(2): two requests, as
  // the man page and README say.
  auto r = bash("printf 'echo a\\necho b\\n' > \"$MNT/cmd\"");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(procs().size(), 2u);
  // The same two lines inside a JSON request are one command, whatever writes them.
  r = bash(R"(printf '%s\n' '{"cmd": "cd /tmp\npwd", "name": "two-lines"}' > "$MNT/cmd")");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(procs().size(), 3u);
  wait_json("two-lines");
  EXPECT_EQ(log("two-lines"), "/tmp\n");
}

TEST_F(CmdTest, PrettyPrintedJson) {
  auto r = run(R"(cat > "$MNT/cmd" <<'EOF'
{
  "cmd": "echo pretty",
  "note": "from a heredoc"
}
EOF
)");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  auto w = wait_json(ids[0]);
  EXPECT_EQ(w["proc"]["note"], "from a heredoc");
  EXPECT_EQ(log(ids[0]), "pretty\n");
}

TEST_F(CmdTest, SecondRequestOnSameOpenFileStartsAnother) {
  auto r = python(R"(
import os
fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
os.write(fd, b'echo one\n'); a = os.read(fd, 100).decode().strip()
os.write(fd, b'echo two\n'); b = os.read(fd, 100).decode().strip()
os.close(fd)
print(a, b)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(r.out);
  std::string a, b;
  in >> a >> b;
  auto names = procs();
  ASSERT_EQ(names.size(), 2u) << "two requests on one open file start two commands";
  EXPECT_EQ(a, names[0]) << "read-back after the first request: " << r.out;
  EXPECT_EQ(b, names[1]) << "read-back after the second request: " << r.out;
  wait_json(names[0]);
  wait_json(names[1]);
  EXPECT_EQ(log(names[0]), "one\n");
  EXPECT_EQ(log(names[1]), "two\n");
}

TEST_F(CmdTest, RefusedBytesWrittenAgainAreARequestWhenTheRefusalMayPass) {
  // EBUSY (the slot runs) and EEXIST (the name is taken) pass with time: the
  // same bytes written again on the same open file are a request again,
  // refused again while the cause lasts (with no second line in errors),
  // started once it is gone. EINVAL never passes: the same errno at once.
  ASSERT_EQ(mkdir_errno(p("procs/slotb")), 0);
  ASSERT_EQ(write_file(p("procs/slotb/cmd"), "sleep 30\n"), 0);
  ASSERT_EQ(mkdir_errno(p("procs/taken")), 0);
  const std::size_t errors_before = errors().size();
  auto r = python(R"(
import errno, os
M = os.environ['MNT']
def w(fd, data):
    try:
        os.write(fd, data)
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
slot = os.open(M + '/procs/slotb/cmd', os.O_WRONLY)
root = os.open(M + '/cmd', os.O_WRONLY)
bad = os.open(M + '/cmd', os.O_WRONLY)
named = b'{"cmd": "echo named", "name": "taken"}\n'
out = [w(slot, b'echo rerun\n'), w(slot, b'echo rerun\n'), w(root, named), w(root, named), w(bad, b'{"cmd": 5}\n')]
with open(M + '/procs/slotb/stop', 'w') as f:
    f.write('x')
os.rmdir(M + '/procs/taken')
out += [w(slot, b'echo rerun\n'), w(root, named), w(bad, b'{"cmd": 5}\n')]
for fd in (slot, root, bad):
    os.close(fd)
print(' '.join(out))
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "EBUSY EBUSY EEXIST EEXIST EINVAL ok ok EINVAL\n");
  wait_ended("slotb");
  EXPECT_EQ(log("slotb"), "rerun\n");
  wait_ended("taken");
  EXPECT_EQ(log("taken"), "named\n");
  std::vector<json> errs = errors();
  ASSERT_EQ(errs.size(), errors_before + 3) << "one line for each refusal, none for its repeats";
  EXPECT_EQ(errs[errors_before]["errno"], "EBUSY");
  EXPECT_EQ(errs[errors_before + 1]["errno"], "EEXIST");
  EXPECT_EQ(errs[errors_before + 2]["errno"], "EINVAL");
}

TEST_F(CmdTest, JsonArgvRunsWithoutShell) {
  std::string id = start(R"({"argv": ["/bin/echo", "a  b", "$HOME", "c"]})");
  ASSERT_FALSE(id.empty());
  auto w = wait_json(id);
  EXPECT_EQ(w["proc"]["exitCode"], 0);
  EXPECT_EQ(w["proc"]["argv"], json({"/bin/echo", "a  b", "$HOME", "c"}));
  EXPECT_EQ(log(id), "a  b $HOME c\n") << "no shell: no word splitting, no expansion";
}

TEST_F(CmdTest, JsonCmdWithEnv) {
  std::string id = start(R"({"cmd": "echo \"$FOO-$BAR\"", "env": {"FOO": "foo value", "BAR": "b"}})");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  EXPECT_EQ(log(id), "foo value-b\n");
  EXPECT_EQ(status_json(id)["cmd"], "echo \"$FOO-$BAR\"");
}

TEST_F(CmdTest, EnvIsAnOverlayOnTheSupervisorEnvironment) {
  // SBX_IT_DIR is in the daemon's environment (the fixture puts it there).
  std::string id = start(R"({"cmd": "echo \"$SBX_IT_DIR|$X\"", "env": {"X": "y"}})");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  EXPECT_EQ(log(id), dir_ + "|y\n");
}

TEST_F(CmdTest, SbxBgidIsInTheCommandsEnvironment) {
  // sbxfs(5): the command's environment has SBX_BGID set to its bgId.
  std::string id = start("echo \"$SBX_BGID\"");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  EXPECT_EQ(log(id), id + "\n");
  std::string named = start(R"({"argv": ["/bin/sh", "-c", "echo $SBX_BGID"], "name": "envname"})");
  ASSERT_EQ(named, "envname");
  wait_json(named);
  EXPECT_EQ(log(named), "envname\n");
}

TEST_F(CmdTest, JsonCwd) {
  ASSERT_EQ(mkdir_errno(dir_ + "/work"), 0);
  std::string id = start(json({{"cmd", "pwd"}, {"cwd", dir_ + "/work"}}).dump());
  ASSERT_FALSE(id.empty());
  wait_json(id);
  EXPECT_EQ(log(id), dir_ + "/work\n");
  EXPECT_EQ(status_json(id)["cwd"], dir_ + "/work");
}

TEST_F(CmdTest, CwdDefaultsToTheWritersCwd) {
  ASSERT_EQ(mkdir_errno(dir_ + "/x"), 0);
  auto r = run("cd \"$T/x\" && echo pwd > \"$MNT/cmd\"");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  wait_json(ids[0]);
  EXPECT_EQ(log(ids[0]), dir_ + "/x\n");
  EXPECT_EQ(status_json(ids[0])["cwd"], dir_ + "/x");
  // And for a JSON request without cwd.
  ASSERT_EQ(mkdir_errno(dir_ + "/y"), 0);
  r = run(R"(cd "$T/y" && echo '{"cmd": "pwd"}' > "$MNT/cmd")");
  ASSERT_EQ(r.code, 0) << r.err;
  ids = procs();
  ASSERT_EQ(ids.size(), 2u);
  wait_json(ids[1]);
  EXPECT_EQ(log(ids[1]), dir_ + "/y\n");
}

TEST_F(CmdTest, NoteAndName) {
  std::string id = start(R"({"cmd": "true", "note": "my note", "name": "job-1.a_B"})");
  ASSERT_EQ(id, "job-1.a_B");
  auto names = procs();
  EXPECT_NE(std::find(names.begin(), names.end(), "job-1.a_B"), names.end());
  auto s = status_json(id);
  EXPECT_EQ(s["bgId"], "job-1.a_B");
  EXPECT_EQ(s["note"], "my note");
  auto w = wait_json(id);
  EXPECT_EQ(w["proc"]["note"], "my note");
}

TEST_F(CmdTest, NameOf64CharsIsAccepted) {
  std::string name(64, 'n');
  std::string id = start(json({{"cmd", "true"}, {"name", name}}).dump());
  EXPECT_EQ(id, name);
}

TEST_F(CmdTest, TimeoutSecEndsTheCommand) {
  std::string id = start(R"({"cmd": "sleep 30", "timeoutSec": 0.5})");
  ASSERT_FALSE(id.empty());
  auto s = wait_ended(id, 8s);
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["endReason"], "timedOut");
  EXPECT_EQ(s["timedOut"], true);
  EXPECT_EQ(s["exitCode"], -1);
  EXPECT_EQ(s["signal"], "SIGTERM");
  auto w = wait_json(id);
  EXPECT_EQ(w["proc"]["endReason"], "timedOut");
  EXPECT_EQ(w["stillRunning"], false);
}

TEST_F(CmdTest, StopGraceSecBoundsTheTermToKillDelay) {
  // The shell and its sleep ignore SIGTERM: only the SIGKILL after the grace ends them.
  std::string id = start(R"({"cmd": "trap '' TERM; echo armed; sleep 30", "stopGraceSec": 1})");
  ASSERT_FALSE(id.empty());
  // Until the trap is set, a TERM would end it at once.
  ASSERT_TRUE(wait_until([&] { return log(id) == "armed\n"; }, 5s)) << log(id);
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_GE(r.seconds, 0.8) << "SIGKILL came before the grace";
  EXPECT_LT(r.seconds, 4.0) << "stopGraceSec 1 was not used (default grace is 5 s)";
  auto s = status_json(id);
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["endReason"], "stopped");
  EXPECT_EQ(s["signal"], "SIGKILL");
  EXPECT_EQ(s["exitCode"], -1);
}

TEST_F(CmdTest, SecretEnvIsMaskedInCmdStatusTailAndWait) {
  const std::string secret = "s3cr3t-V4lue";
  std::string id = start(json({{"cmd", "echo literal " + secret + "; echo env $TOK; sleep 30"},
                               {"secretEnv", {{"TOK", secret}}}})
                             .dump());
  ASSERT_FALSE(id.empty());
  // The secret was really used: the raw log in the state directory holds it.
  ASSERT_TRUE(wait_until(
      [&] { return read_file(state_ + "/procs/" + id + "/log").data.find("env " + secret) != std::string::npos; },
      5s))
      << "the command did not print the secret";
  auto no_secret = [&](const std::string& what, const std::string& text) {
    EXPECT_EQ(text.find(secret), std::string::npos) << what << " shows the secret: " << text;
    EXPECT_NE(text.find("****"), std::string::npos) << what << " has no mask: " << text;
  };
  no_secret("procs/ID/cmd", read_file(p("procs/" + id + "/cmd")).data);
  no_secret("procs/ID/status.json", read_file(p("procs/" + id + "/status.json")).data);
  no_secret("status.json", read_file(p("status.json")).data);
  no_secret("procs/ID/tail", read_file(p("procs/" + id + "/tail")).data);
  EXPECT_EQ(run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}}).code, 0);
  auto w = read_file(p("procs/" + id + "/wait"));
  no_secret("procs/ID/wait", w.data);
  auto wj = parse_json(w.data);
  ASSERT_TRUE(wj.is_object());
  no_secret("wait logTail", wj["proc"]["logTail"].get<std::string>());
}

TEST_F(CmdTest, InvalidUtf8OutputStillGivesValidJson) {
  std::string id = start(R"(printf 'bad \377\376 bytes\n')");
  ASSERT_FALSE(id.empty());
  auto w = wait_json(id);
  ASSERT_TRUE(w.is_object());
  EXPECT_TRUE(w["proc"]["logTail"].is_string());
  auto t = read_file(p("procs/" + id + "/tail"));
  EXPECT_EQ(t.err, 0);
  EXPECT_EQ(read_file(p("procs/" + id + "/log")).data, "bad \377\376 bytes\n") << "log is the raw bytes";
}

}  // namespace
}  // namespace sbxit
