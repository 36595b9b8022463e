// Rejected requests: the errno of the write, the reason on the same open
// file, a line in `errors`, and nothing started.
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

struct BadRequest {
  const char* what;
  std::string request;  // %T is replaced by the temp dir
  int err;
};

std::string subst(std::string s, const std::string& dir) {
  for (size_t pos; (pos = s.find("%T")) != std::string::npos;) s.replace(pos, 2, dir);
  return s;
}

// Every request the decisions reject, with its errno.
const std::vector<BadRequest>& bad_requests() {
  static const std::vector<BadRequest> v = {
      {"unknown key", R"({"cmd": "true", "bogus": 1})", EINVAL},
      {"cmd not a string", R"({"cmd": 5})", EINVAL},
      {"argv not an array", R"({"argv": "ls"})", EINVAL},
      {"argv element not a string", R"({"argv": ["/bin/echo", 1]})", EINVAL},
      {"empty cmd", R"({"cmd": ""})", EINVAL},
      {"empty argv", R"({"argv": []})", EINVAL},
      {"neither cmd nor argv", R"({"note": "nothing to run"})", EINVAL},
      {"both cmd and argv", R"({"cmd": "true", "argv": ["/bin/true"]})", EINVAL},
      {"env not an object", R"({"cmd": "true", "env": ["A=1"]})", EINVAL},
      {"env value not a string", R"({"cmd": "true", "env": {"A": 1}})", EINVAL},
      {"secretEnv value not a string", R"({"cmd": "true", "secretEnv": {"A": true}})", EINVAL},
      {"note not a string", R"({"cmd": "true", "note": 5})", EINVAL},
      {"name with a space", R"({"cmd": "true", "name": "a b"})", EINVAL},
      {"name ..", R"({"cmd": "true", "name": ".."})", EINVAL},
      {"name .", R"({"cmd": "true", "name": "."})", EINVAL},
      {"name empty", R"({"cmd": "true", "name": ""})", EINVAL},
      {"name too long", R"({"cmd": "true", "name": ")" + std::string(65, 'n') + "\"}", ENAMETOOLONG},
      {"timeoutSec 0", R"({"cmd": "true", "timeoutSec": 0})", EINVAL},
      {"timeoutSec negative", R"({"cmd": "true", "timeoutSec": -1})", EINVAL},
      {"timeoutSec not a number", R"({"cmd": "true", "timeoutSec": "5"})", EINVAL},
      {"stopGraceSec negative", R"({"cmd": "true", "stopGraceSec": -1})", EINVAL},
      {"cwd missing", R"({"cmd": "true", "cwd": "%T/no/such/dir"})", ENOENT},
      {"cwd not a directory", R"({"cmd": "true", "cwd": "%T/plainfile"})", ENOTDIR},
      {"argv[0] not found", R"({"argv": ["%T/no-such-program"]})", ENOENT},
      {"argv[0] not executable", R"({"argv": ["%T/plainfile"]})", EACCES},
      {"argv[0] random bytes", R"({"argv": ["%T/random-bytes"]})", EACCES},
      {"argv[0] an ELF for another machine", R"({"argv": ["%T/foreign-elf"]})", EACCES},
      {"argv[0] a broken ELF", R"({"argv": ["%T/broken-elf"]})", EACCES},
      {"argv[0] a script without #!", R"({"argv": ["%T/no-hashbang", "arg"]})", EACCES},
      {"argv[0] found in PATH, not a program", R"({"argv": ["no-hashbang"], "env": {"PATH": "/nonexistent:%T"}})",
       EACCES},
      {"name taken", R"({"cmd": "true", "name": "taken"})", EEXIST},
  };
  return v;
}

class ErrorsTest : public SbxfsTest {
 protected:
  void SetUp() override {
    SbxfsTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(write_file(dir_ + "/plainfile", "not a program\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
    ::chmod((dir_ + "/plainfile").c_str(), 0644);
    // Executable files the kernel refuses to run (execve: ENOEXEC; the tree: EACCES). Run through a
    // shell (execvp's fallback), the script would leave %T/ran behind.
    std::string random_bytes;
    for (int i = 0; i < 512; ++i) random_bytes += static_cast<char>((i * 151 + 7) & 0xff);
    random_bytes[0] = '\x01';
    std::string elf(64, '\0');  // an ELF header, e_machine of another architecture
    elf.replace(0, 7, "\x7f" "ELF\x02\x01\x01");
    elf[16] = 2;  // ET_EXEC
#if defined(__x86_64__)
    elf[18] = static_cast<char>(183);  // EM_AARCH64
#else
    elf[18] = 62;  // EM_X86_64
#endif
    elf[20] = 1;   // EV_CURRENT
    elf[52] = 64;  // e_ehsize
    for (const auto& [name, content] : std::vector<std::pair<std::string, std::string>>{
             {"random-bytes", random_bytes},
             {"foreign-elf", elf},
             {"broken-elf", "\x7f" "ELFgarbage"},
             {"no-hashbang", "touch \"" + dir_ + "/ran\"\n"}}) {
      ASSERT_EQ(write_file(dir_ + "/" + name, content, O_WRONLY | O_CREAT | O_TRUNC), 0);
      ASSERT_EQ(::chmod((dir_ + "/" + name).c_str(), 0755), 0);
    }
    ASSERT_EQ(start(R"({"cmd": "sleep 30", "name": "taken"})"), "taken");
  }

  std::vector<std::string> state_procs() {
    auto v = list_dir(state_ + "/procs");
    std::sort(v.begin(), v.end());
    return v;
  }
};

// `errors` outlives a restart of the daemon, killed or not, and holds the
// latest 100 lines however many came (its file in the state directory is
// compacted as it grows).
TEST_F(ErrorsTest, TheLinesOutliveARestart) {
  ASSERT_NE(write_file(p("cmd"), "{\"cmd\": \"x\", \"cwd\": \"/nope-first\"}\n"), 0);
  ASSERT_TRUE(restart_daemon()) << daemon_log();
  auto lines = errors();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0]["error"].get<std::string>().find("/nope-first"), std::string::npos) << lines[0].dump();
  EXPECT_EQ(lines[0]["path"], "cmd");

  const RunResult r = run("for i in $(seq 1 250); do printf '%s\\n' \"{\\\"cmd\\\": \\\"x\\\", \\\"cwd\\\": \\\"/nope-$i\\\"}\" "
                          "> \"$MNT/cmd\" 2>/dev/null; done; true", 120);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  lines = errors();
  ASSERT_EQ(lines.size(), 100u);
  EXPECT_NE(lines.front()["error"].get<std::string>().find("/nope-151"), std::string::npos) << lines.front().dump();
  EXPECT_NE(lines.back()["error"].get<std::string>().find("/nope-250"), std::string::npos) << lines.back().dump();
  std::size_t in_file = 0;
  for (char c : read_file(state_ + "/errors").data) in_file += c == '\n';
  EXPECT_LT(in_file, 200u) << "compacted";

  // A line torn by a crash in its write is dropped, never joined to the next.
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(write_file(state_ + "/errors", "{\"at\": \"torn", O_WRONLY | O_APPEND), 0);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  ASSERT_NE(write_file(p("cmd"), "{\"cmd\": \"x\", \"cwd\": \"/nope-after-torn\"}\n"), 0);
  ASSERT_TRUE(restart_daemon()) << daemon_log();
  lines = errors();
  ASSERT_EQ(lines.size(), 100u);
  for (const json& l : lines) EXPECT_TRUE(l.is_object()) << l.dump();
  EXPECT_NE(lines.back()["error"].get<std::string>().find("/nope-after-torn"), std::string::npos) << lines.back().dump();
}

TEST_F(ErrorsTest, EveryBadRequestFromPython) {
  for (const auto& bad : bad_requests()) {
    SCOPED_TRACE(bad.what);
    const std::string req = subst(bad.request, dir_) + "\n";
    auto before = procs();
    auto state_before = state_procs();
    auto errs_before = errors().size();
    auto r = python(R"(
import os, json, sys
fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
res = {}
try:
    os.write(fd, os.environ['REQ'].encode())
    res['errno'] = 0
except OSError as e:
    res['errno'] = e.errno
res['readback'] = os.read(fd, 4096).decode('utf-8', 'replace')
try:
    os.close(fd)
except OSError as e:
    res['close'] = e.errno
print(json.dumps(res))
)",
                    20, {{"REQ", req}});
    ASSERT_EQ(r.code, 0) << r.err;
    auto res = parse_json(r.out);
    ASSERT_TRUE(res.is_object()) << r.out;
    EXPECT_EQ(res["errno"], bad.err) << "expected " << errno_name(bad.err) << ", got " << res["errno"];
    const std::string rb = res["readback"].get<std::string>();
    const std::string prefix = "error: " + errno_name(bad.err) + ": ";
    EXPECT_EQ(rb.rfind(prefix, 0), 0u) << "read-back: " << rb;
    EXPECT_GT(rb.size(), prefix.size() + 1) << "no reason given";
    EXPECT_EQ(rb.back(), '\n');
    EXPECT_FALSE(res.contains("close")) << "close failed too: " << res["close"];
    EXPECT_EQ(procs(), before) << "nothing is created";
    EXPECT_EQ(state_procs(), state_before) << "nothing is left in the state directory";
    auto errs = errors();
    ASSERT_EQ(errs.size(), errs_before + 1) << "one line in errors";
    auto& e = errs.back();
    EXPECT_EQ(e["errno"], errno_name(bad.err));
    EXPECT_EQ(e["path"], "cmd");
    EXPECT_TRUE(is_iso_time(e["at"])) << e.dump();
    ASSERT_TRUE(e["error"].is_string()) << e.dump();
    EXPECT_NE(rb.find(e["error"].get<std::string>()), std::string::npos)
        << "errors says '" << e["error"] << "', the read-back says '" << rb << "'";
    ASSERT_TRUE(e["request"].is_string()) << e.dump();
    std::string logged = e["request"];
    std::string want = req.substr(0, 200);
    EXPECT_TRUE(logged == want || logged + "\n" == want) << "request logged as: " << logged;
  }
}

// An argv request runs no shell: a file that is not a program is refused
// (the table above), never run by /bin/sh; as plain text, the shell runs it.
TEST_F(ErrorsTest, ArgvNotAProgramRunsNoShell) {
  auto r = bash("echo \"$REQ\" > \"$MNT/cmd\"", 10, {{"REQ", R"({"argv": [")" + dir_ + R"(/no-hashbang"]})"}});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("write error: Permission denied"), std::string::npos) << r.err;
  EXPECT_NE(errors().back()["error"].get<std::string>().find("Exec format error"), std::string::npos);
  const std::string why = errors().back()["error"];
  EXPECT_NE(why.find("no-hashbang"), std::string::npos) << why;
  EXPECT_NE(why.find("no shell"), std::string::npos) << why;
  EXPECT_EQ(stat_errno(dir_ + "/ran"), ENOENT) << "the script was run by a shell";
  // The same file as plain text is shell text: sh runs it as a script.
  const std::string id = start(dir_ + "/no-hashbang");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(stat_errno(dir_ + "/ran"), 0);
}

TEST_F(ErrorsTest, BashEchoReportsTheErrno) {
  struct Case {
    std::string req;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"cmd": "true", "bogus": 1})", "Invalid argument"},
      {R"({"cmd": "true", "cwd": "/no/such/dir"})", "No such file or directory"},
      {R"({"cmd": "true", "cwd": "/etc/passwd"})", "Not a directory"},
      {R"({"cmd": "true", "name": "taken"})", "File exists"},
      {R"({"argv": [")" + dir_ + R"(/plainfile"]})", "Permission denied"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.req);
    auto before = procs();
    auto r = bash("echo \"$REQ\" > \"$MNT/cmd\"", 10, {{"REQ", c.req}});
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("write error: " + c.message), std::string::npos) << r.err;
    EXPECT_EQ(procs(), before);
  }
  // /bin/echo reports it too.
  auto r = run("/bin/echo '{\"cmd\": 5}' > \"$MNT/cmd\"");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << r.err;
}

TEST_F(ErrorsTest, ReadBackFromBashAfterAFailedWrite) {
  auto r = bash(R"(exec 3<>"$MNT/cmd"; echo '{"cmd": 5}' >&3; echo "rc=$?"; read -r line <&3; echo "$line")");
  EXPECT_NE(r.out.find("rc=1\nerror: EINVAL: "), std::string::npos) << r.out << r.err;
}

TEST_F(ErrorsTest, MalformedJson) {
  auto before = procs();
  auto errs_before = errors().size();
  auto r = python(R"(
import os
try:
    with open(os.environ['MNT'] + '/cmd', 'w') as f:
        f.write('{"cmd": "true",}\n')
    print('ok')
except OSError as e:
    print(e.errno)
)");
  EXPECT_EQ(r.out, std::to_string(EINVAL) + "\n") << r.err;
  EXPECT_EQ(procs(), before);
  auto errs = errors();
  ASSERT_EQ(errs.size(), errs_before + 1);
  EXPECT_EQ(errs.back()["errno"], "EINVAL");
}

TEST_F(ErrorsTest, IncompleteJsonFailsAtClose) {
  auto before = procs();
  auto r = python(R"(
import os
f = open(os.environ['MNT'] + '/cmd', 'w')
f.write('{"cmd": "true"')
f.flush()
print('write ok')
try:
    f.close()
    print('close ok')
except OSError as e:
    print('close', e.errno)
)");
  EXPECT_EQ(r.out, "write ok\nclose " + std::to_string(EINVAL) + "\n") << r.err;
  EXPECT_EQ(procs(), before);
  EXPECT_EQ(errors().back()["errno"], "EINVAL");
  // /bin/echo sees the error of close() too.
  r = run("printf '{\"cmd\": 1' > \"$MNT/cmd\" && /bin/echo -n '{\"cmd\": \"true\"' > \"$MNT/cmd\"");
  EXPECT_NE(r.code, 0);
}

TEST_F(ErrorsTest, OverTheSizeCapIsE2BIG) {
  extend_watchdog(30s);
  auto before = procs();
  auto r = python(R"(
import os, json
data = (json.dumps({"cmd": "true", "note": "x" * (4 * 1024 * 1024 + 1000)}) + "\n").encode()
fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
res = {"errno": 0}
try:
    while data:
        n = os.write(fd, data)
        data = data[n:]
except OSError as e:
    res["errno"] = e.errno
res["readback"] = os.read(fd, 4096).decode()
try:
    os.close(fd)
except OSError:
    pass
print(json.dumps(res))
)",
                  40);
  ASSERT_EQ(r.code, 0) << r.err;
  auto res = parse_json(r.out);
  ASSERT_TRUE(res.is_object()) << r.out;
  EXPECT_EQ(res["errno"], E2BIG);
  EXPECT_EQ(res["readback"].get<std::string>().rfind("error: E2BIG: ", 0), 0u) << res["readback"];
  EXPECT_EQ(procs(), before);
  auto errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "E2BIG");
  EXPECT_LE(errs.back()["request"].get<std::string>().size(), 200u);
  // The plain-text way: bash's echo of a 5 MB line.
  auto b = bash(R"SH(echo "echo $(head -c 5000000 /dev/zero | tr '\0' x)" > "$MNT/cmd")SH", 40);
  EXPECT_EQ(b.code, 1);
  EXPECT_NE(b.err.find("Argument list too long"), std::string::npos) << b.err.substr(0, 300);
  EXPECT_EQ(procs(), before);
}

TEST_F(ErrorsTest, ErrorsKeepsTheLatest100NewestLast) {
  auto r = python(R"(
import os
for i in range(105):
    fd = os.open(os.environ['MNT'] + '/cmd', os.O_WRONLY)
    try:
        os.write(fd, ('{"bogus": %d}\n' % i).encode())
    except OSError:
        pass
    os.close(fd)
)",
                  40);
  ASSERT_EQ(r.code, 0) << r.err;
  auto raw = file("errors");
  ASSERT_FALSE(raw.empty());
  EXPECT_EQ(raw.back(), '\n');
  auto errs = errors();
  ASSERT_EQ(errs.size(), 100u);
  EXPECT_NE(errs.front()["request"].get<std::string>().find("\"bogus\": 5}"), std::string::npos)
      << errs.front().dump();
  EXPECT_NE(errs.back()["request"].get<std::string>().find("\"bogus\": 104}"), std::string::npos)
      << errs.back().dump();
}

TEST_F(ErrorsTest, RejectedSlotRequestIsLoggedWithItsPath) {
  ASSERT_EQ(mkdir_errno(p("procs/s1")), 0);
  EXPECT_EQ(write_file(p("procs/s1/cmd"), R"({"cmd": "true", "cwd": "/no/such"})" "\n"), ENOENT);
  auto errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["path"], "procs/s1/cmd");
  EXPECT_EQ(errs.back()["errno"], "ENOENT");
  EXPECT_EQ(status_json("s1")["state"], "empty");
}

TEST_F(ErrorsTest, FoldersOutsideProcsAreEpermWithALine) {
  ASSERT_EQ(mkdir_errno(p("procs/s1")), 0);
  struct Case {
    std::string path;
    bool make;
  };
  for (const Case& c : {Case{"foo", true}, Case{"logs/zz", true}, Case{"procs/s1/sub", true}, Case{"procs", false},
                        Case{"logs", false}}) {
    const int err = c.make ? mkdir_errno(p(c.path)) : (::rmdir(p(c.path).c_str()) == 0 ? 0 : errno);
    EXPECT_EQ(err, EPERM) << c.path;
    const auto errs = errors();
    ASSERT_FALSE(errs.empty()) << c.path;
    EXPECT_EQ(errs.back()["path"], c.path);
    EXPECT_EQ(errs.back()["errno"], "EPERM");
  }
}

class SmallCapTest : public SbxfsTest {
 protected:
  SmallCapTest() { daemon_options_ = {"-o", "max_request=65536"}; }
};

TEST_F(SmallCapTest, MaxRequestOptionSetsTheCap) {
  auto r = python(R"(
import os, json
def send(n):
    data = (json.dumps({"cmd": "true", "note": "y" * n}) + "\n").encode()
    fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
    try:
        while data:
            data = data[os.write(fd, data):]
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)
print(send(60000), send(100000))
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0 " + std::to_string(E2BIG) + "\n");
  EXPECT_EQ(procs().size(), 1u);
}

class SecretsFileTest : public SbxfsTest {
 protected:
  void SetUp() override {
    // The secrets file must exist before the daemon starts; SbxfsTest::SetUp
    // makes the temp dir, so put the file in a dir of our own first.
    char tmpl[] = "/tmp/sbxit-secrets-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    secrets_dir_ = tmpl;
    ASSERT_EQ(write_file(secrets_dir_ + "/secrets", "API_KEY=hunter2-very-secret\n",
                         O_WRONLY | O_CREAT | O_TRUNC),
              0);
    daemon_options_ = {"--secrets-file", secrets_dir_ + "/secrets"};
    SbxfsTest::SetUp();
  }
  void TearDown() override {
    SbxfsTest::TearDown();
    ::unlink((secrets_dir_ + "/secrets").c_str());
    ::rmdir(secrets_dir_.c_str());
  }
  std::string secrets_dir_;
};

TEST_F(SecretsFileTest, ValuesAreMaskedEverywhere) {
  const std::string secret = "hunter2-very-secret";
  std::string id = start("echo key=" + secret);
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  for (std::string f : {"cmd", "status.json", "tail", "wait"}) {
    auto text = file("procs/" + id + "/" + f);
    EXPECT_EQ(text.find(secret), std::string::npos) << f << ": " << text;
    EXPECT_NE(text.find("****"), std::string::npos) << f << ": " << text;
  }
  // A rejected request holding the secret: errors masks it too.
  EXPECT_EQ(write_file(p("cmd"), R"({"cmd": "echo )" + secret + R"(", "bogus": 1})" "\n"), EINVAL);
  auto raw = file("errors");
  EXPECT_EQ(raw.find(secret), std::string::npos) << raw;
}


// The writer's working directory is the default cwd; one whose name is not
// UTF-8 cannot be recorded (records are JSON): EINVAL, nothing is claimed,
// and the same open file takes the next request.
TEST_F(ErrorsTest, AWorkingDirectoryThatIsNotTextIsRefusedCleanly) {
  auto r = bash("d=\"$T/caf$(printf '\\351')\"; mkdir \"$d\" && cd \"$d\" && exec 3<>\"$MNT/cmd\" && "
                "{ echo true >&3 || echo refused; read -r a <&3; echo \"$a\"; "
                "printf '%s\\n' '{\"cmd\": \"true\", \"cwd\": \"/\"}' >&3 && read -r b <&3 && echo \"started $b\"; }");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("refused"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("error: EINVAL: cwd is not text"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("started "), std::string::npos) << "the next request on the same file: " << r.out << r.err;
  EXPECT_NE(errors().back()["error"].get<std::string>().find("cwd is not text"), std::string::npos);
}

}  // namespace
}  // namespace sbxit
