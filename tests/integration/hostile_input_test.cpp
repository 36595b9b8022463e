// Hostile input through a real mount: a corpus of malformed requests to
// cmd, procs/ID/cmd, ready, signal and mkdir procs/NAME (binary garbage, NUL
// bytes, invalid UTF-8, an 8 MiB line, deep JSON nesting, huge numbers, wrong
// types, bad names). Each gets a fitting errno and exactly one line in
// `errors` that names the reason; the daemon stays up and answers, and
// nothing is half-created: procs/ and the state directory are unchanged.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

/// One malformed request: written to `file` (relative to the mount).
struct Case {
  std::string what;
  std::string file;
  std::string data;
  int err;
  std::string reason;  ///< a piece of the reason that `errors` must show
};

/// What one open, write (all of it), read back, close on a file gave.
struct Exchange {
  int err = 0;           ///< errno of the failing write or close; 0: none failed
  std::string readback;  ///< read on the same open file after the write
};

Exchange exchange(const std::string& path, std::string_view data, bool read_back) {
  Exchange x;
  const int fd = ::open(path.c_str(), read_back ? O_RDWR : O_WRONLY);
  if (fd < 0) {
    x.err = errno;
    return x;
  }
  for (std::size_t off = 0; off < data.size();) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      x.err = errno;
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  if (read_back) {
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) x.readback.assign(buf, static_cast<std::size_t>(n));
  }
  if (::close(fd) != 0 && x.err == 0) x.err = errno;
  return x;
}

/// `n` pseudo-random bytes (a fixed seed: the same corpus every run).
std::string garbage(std::size_t n, std::uint32_t seed, bool with_nul) {
  std::string s(n, '\0');
  for (char& c : s) {
    seed = seed * 1664525u + 1013904223u;
    c = static_cast<char>(seed >> 24);
    if (!with_nul && c == '\0') c = '\xff';
  }
  s[0] = 'x';  // not '{': the plain-text path
  return s;
}

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

const std::string kBigLine(8u << 20, 'x');

std::vector<Case> corpus() {
  const std::string deep = nested(100000);
  return {
      // cmd: binary data and bytes that are not text
      {"binary garbage with NULs", "cmd", garbage(4096, 1, true), EINVAL, "not text"},
      {"binary garbage, no NUL", "cmd", garbage(4096, 2, false) + "\n", EINVAL, "not UTF-8"},
      {"a NUL byte in text", "cmd", std::string("echo a\0b\n", 9), EINVAL, "NUL byte"},
      {"a raw NUL in a JSON string", "cmd", std::string("{\"cmd\": \"a") + '\0' + "b\"}\n", EINVAL,
       "a NUL byte at byte 11"},
      {"an escaped NUL in a JSON string", "cmd", R"({"cmd": "a\u0000b"})" "\n", EINVAL, "NUL byte"},
      {"invalid UTF-8 in text", "cmd", "echo \xff\xfe\n", EINVAL, "0xff"},
      {"an overlong UTF-8 form in text", "cmd", "echo \xc0\xaf\n", EINVAL, "not UTF-8"},
      {"a UTF-16 surrogate in text", "cmd", "echo \xed\xa0\x80\n", EINVAL, "not UTF-8"},
      {"invalid UTF-8 in a JSON string", "cmd", "{\"cmd\": \"echo \xc3\x28\"}\n", EINVAL, "UTF-8"},
      // cmd: size and shape
      {"an 8 MiB line of text", "cmd", "echo " + kBigLine + "\n", E2BIG, "larger than"},
      {"an 8 MiB JSON string", "cmd", R"({"cmd": "true", "note": ")" + kBigLine + "\"}\n", E2BIG, "larger than"},
      {"100 000 nested arrays", "cmd", R"({"cmd": "true", "note": )" + deep + "}\n", EINVAL, "'note' must be a string"},
      {"100 000 unclosed arrays", "cmd", R"({"cmd": "true", "note": )" + std::string(100000, '[') + "}\n", EINVAL,
       "malformed JSON"},
      {"JSON with trailing bytes", "cmd", R"({"cmd": "true"} {"cmd": "true"})" "\n", EINVAL, "malformed JSON"},
      {"a trailing comma", "cmd", R"({"cmd": "true",})" "\n", EINVAL, "malformed JSON"},
      // cmd: numbers
      {"timeoutSec 1e400", "cmd", R"({"cmd": "true", "timeoutSec": 1e400})" "\n", EINVAL, "number overflow"},
      {"timeoutSec -1", "cmd", R"({"cmd": "true", "timeoutSec": -1})" "\n", EINVAL, "timeoutSec"},
      {"timeoutSec 2^64", "cmd", R"({"cmd": "true", "timeoutSec": 18446744073709551616})" "\n", EINVAL, "too large"},
      {"timeoutSec 1e-400", "cmd", R"({"cmd": "true", "timeoutSec": 1e-400})" "\n", EINVAL, "> 0"},
      {"stopGraceSec 1e308", "cmd", R"({"cmd": "true", "stopGraceSec": 1e308})" "\n", EINVAL, "too large"},
      {"readyPort 2^64", "cmd", R"({"cmd": "true", "readyPort": 18446744073709551616})" "\n", EINVAL, "readyPort"},
      {"readyPort -1", "cmd", R"({"cmd": "true", "readyPort": -1})" "\n", EINVAL, "readyPort"},
      {"a 5000-digit number", "cmd", R"({"cmd": "true", "timeoutSec": )" + std::string(5000, '9') + "}\n", EINVAL,
       "number overflow"},
      // cmd: wrong types
      {"argv an object", "cmd", R"({"argv": {"0": "/bin/true"}})" "\n", EINVAL, "'argv' must be an array"},
      {"cmd null", "cmd", R"({"cmd": null})" "\n", EINVAL, "'cmd' must be a string"},
      {"cwd a number", "cmd", R"({"cmd": "true", "cwd": 5})" "\n", EINVAL, "'cwd' must be a string"},
      {"env a string", "cmd", R"({"cmd": "true", "env": "A=1"})" "\n", EINVAL, "'env' must be an object"},
      {"timeoutSec a boolean", "cmd", R"({"cmd": "true", "timeoutSec": true})" "\n", EINVAL, "must be a number"},
      {"readyLog a number", "cmd", R"({"cmd": "true", "readyLog": 5})" "\n", EINVAL, "'readyLog' must be a string"},
      // cmd: names
      {"a name with /", "cmd", R"({"cmd": "true", "name": "a/b"})" "\n", EINVAL, "0x2f"},
      {"the name ..", "cmd", R"({"cmd": "true", "name": ".."})" "\n", EINVAL, "'..'"},
      {"a name with a control character", "cmd", R"({"cmd": "true", "name": "a\u0001b"})" "\n", EINVAL, "0x01"},
      {"a name with a newline", "cmd", R"({"cmd": "true", "name": "a\nb"})" "\n", EINVAL, "0x0a"},
      {"a name of 300 characters", "cmd", R"({"cmd": "true", "name": ")" + std::string(300, 'n') + "\"}\n",
       ENAMETOOLONG, "longer than 64"},
      {"a cwd of 5000 characters", "cmd", R"({"cmd": "true", "cwd": "/)" + std::string(5000, 'd') + "\"}\n",
       ENAMETOOLONG, "File name too long"},
      {"a relative cwd with ..", "cmd", R"({"cmd": "true", "cwd": "../.."})" "\n", EINVAL, "absolute"},
      {"an argv[0] of 300 characters looked for in PATH", "cmd", R"({"argv": [")" + std::string(300, 'a') + "\"]}\n",
       ENAMETOOLONG, "File name too long"},
      // cmd: the JSON parser took a NUL for the end of its input (audit)
      {"a NUL after the object", "cmd", std::string("{\"cmd\": \"true\"}") + '\0' + "{\"cmd\": \"false\"}\n", EINVAL,
       "a NUL byte at byte 16"},
      // procs/slot/cmd
      {"slot: binary garbage", "procs/slot/cmd", garbage(1000, 3, true), EINVAL, "not text"},
      {"slot: a NUL after the object", "procs/slot/cmd", std::string("{\"cmd\": \"echo x\"}") + '\0' + "garbage", EINVAL,
       "a NUL byte at byte 18"},
      {"slot: invalid UTF-8", "procs/slot/cmd", "echo \x80\n", EINVAL, "not UTF-8"},
      {"slot: another name", "procs/slot/cmd", R"({"cmd": "true", "name": "../x"})" "\n", EINVAL, "0x2f"},
      {"slot: 100 000 nested arrays", "procs/slot/cmd", R"({"argv": )" + deep + "}\n", EINVAL, "'argv' must hold only strings"},
      // ready
      {"ready: binary garbage", "procs/run/ready", garbage(1000, 4, true), EINVAL, "not text"},
      {"ready: invalid UTF-8", "procs/run/ready", "log \xff(\n", EINVAL, "not UTF-8"},
      {"ready: a NUL byte", "procs/run/ready", std::string("port 80\0", 8), EINVAL, "NUL byte"},
      {"ready: port 2^64", "procs/run/ready", "port 18446744073709551616\n", EINVAL, "bad port"},
      {"ready: port -1", "procs/run/ready", "port -1\n", EINVAL, "bad port"},
      {"ready: a bad regex", "procs/run/ready", "log (\n", EINVAL, "bad regular expression"},
      {"ready: an 8 MiB regex", "procs/run/ready", "log " + kBigLine + "\n", E2BIG, "at most 4095 bytes"},
      {"ready: 1000 nested arrays", "procs/run/ready", R"({"readyPort": )" + nested(1000) + "}", EINVAL, "readyPort"},
      {"ready: 100 000 nested arrays", "procs/run/ready", R"({"readyPort": )" + deep + "}", E2BIG, "at most 4095"},
      {"ready: readyPort 1e400", "procs/run/ready", R"({"readyPort": 1e400})", EINVAL, "malformed JSON"},
      {"ready: a path with a control character", "procs/run/ready", "http 80 /a\x01b\n", EINVAL, "control"},
      // signal
      {"signal: binary garbage", "procs/run/signal", garbage(1000, 5, true), EINVAL, "unknown signal"},
      {"signal: 2^64", "procs/run/signal", "18446744073709551616\n", EINVAL, "unknown signal"},
      {"signal: 0", "procs/run/signal", "0\n", EINVAL, "unknown signal"},
      {"signal: -9", "procs/run/signal", "-9\n", EINVAL, "unknown signal"},
      {"signal: an 8 MiB line", "procs/run/signal", kBigLine, EINVAL, "unknown signal"},
  };
}

class HostileInputTest : public SbxfsTest {
 protected:
  HostileInputTest() { watchdog_budget_ = std::chrono::seconds(90); }

  void SetUp() override {
    SbxfsTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(start(R"({"cmd": "sleep 60", "name": "run"})"), "run");
    ASSERT_EQ(mkdir_errno(p("procs/slot")), 0);
  }

  std::vector<std::string> state_procs() {
    auto v = list_dir(state_ + "/procs");
    std::sort(v.begin(), v.end());
    return v;
  }

  /// The daemon is up and answers: a fresh open of a file of the tree works.
  void expect_alive() {
    EXPECT_TRUE(pid_alive(daemon_pid()));
    EXPECT_EQ(read_file(p("procs/run/cmd")).data, "sleep 60\n");
  }
};

TEST_F(HostileInputTest, EveryMalformedRequestGetsAnErrnoAndOneErrorsLine) {
  const auto before = procs();
  const auto state_before = state_procs();
  for (const Case& c : corpus()) {
    SCOPED_TRACE(c.what);
    const std::size_t errs_before = errors().size();
    const bool is_cmd = c.file.size() >= 3 && c.file.compare(c.file.size() - 3, 3, "cmd") == 0;
    const Exchange x = exchange(p(c.file), c.data, is_cmd);
    EXPECT_EQ(x.err, c.err) << "expected " << errno_name(c.err) << ", got " << errno_name(x.err);
    if (is_cmd) {
      const std::string prefix = "error: " + errno_name(c.err) + ": ";
      EXPECT_EQ(x.readback.rfind(prefix, 0), 0u) << "read-back: " << x.readback.substr(0, 300);
    }
    const auto errs = errors();
    ASSERT_EQ(errs.size(), errs_before + 1) << "exactly one line in errors";
    const json& e = errs.back();
    EXPECT_EQ(e["errno"], errno_name(c.err)) << e.dump();
    EXPECT_EQ(e["path"], c.file) << e.dump();
    ASSERT_TRUE(e["error"].is_string()) << e.dump();
    const std::string reason = e["error"];
    EXPECT_NE(reason.find(c.reason), std::string::npos) << "reason: " << reason;
    EXPECT_LE(reason.size(), 310u) << "a reason is short";
    EXPECT_LT(e.dump().size(), 2000u) << "a line in errors is short";
    EXPECT_EQ(procs(), before) << "nothing is created";
    EXPECT_EQ(state_procs(), state_before) << "nothing is left in the state directory";
    expect_alive();
  }
  // The targets are unharmed: the command runs on, the slot is still empty.
  EXPECT_EQ(status_json("run")["state"], "running");
  EXPECT_EQ(status_json("slot")["state"], "empty");
}

TEST_F(HostileInputTest, BadNamesForMkdir) {
  struct Name {
    std::string name;
    int err;
    std::string reason;
  };
  const std::vector<Name> names = {
      {"a\x01" "b", EINVAL, "0x01"},
      {"tab\there", EINVAL, "0x09"},
      {"new\nline", EINVAL, "0x0a"},
      {"caf\xc3\xa9", EINVAL, "0xc3"},
      {"\xff\xfe", EINVAL, "0xff"},
      {"sp ace", EINVAL, "0x20"},
      {std::string(65, 'n'), ENAMETOOLONG, "longer than 64"},
      {std::string(300, 'n'), ENAMETOOLONG, "longer than 64"},
  };
  const auto before = procs();
  const auto state_before = state_procs();
  for (const Name& n : names) {
    SCOPED_TRACE(n.name.substr(0, 20));
    const std::size_t errs_before = errors().size();
    EXPECT_EQ(mkdir_errno(p("procs/" + n.name)), n.err);
    const auto errs = errors();
    ASSERT_EQ(errs.size(), errs_before + 1);
    EXPECT_EQ(errs.back()["errno"], errno_name(n.err));
    EXPECT_NE(errs.back()["error"].get<std::string>().find(n.reason), std::string::npos) << errs.back().dump();
    EXPECT_EQ(procs(), before);
    EXPECT_EQ(state_procs(), state_before);
  }
  // What the kernel answers itself never reaches the daemon: "a/b" looks up
  // "a", "." and ".." exist. No line in errors for those.
  const std::size_t errs_before = errors().size();
  EXPECT_EQ(mkdir_errno(p("procs/no-such/b")), ENOENT);
  EXPECT_EQ(mkdir_errno(p("procs/..")), EEXIST);
  EXPECT_EQ(errors().size(), errs_before);
  EXPECT_EQ(procs(), before);
  expect_alive();
}

// The same from a shell: bash's echo and printf report the errno in words.
TEST_F(HostileInputTest, FromBash) {
  const auto before = procs();
  struct Line {
    std::string script;  // runs with MNT set; must end in a write to the tree
    std::string message;
  };
  const std::vector<Line> lines = {
      {R"SH(printf 'echo \377\376\n' > "$MNT/cmd")SH", "Invalid argument"},
      {R"SH(printf 'echo a\000b\n' > "$MNT/cmd")SH", "Invalid argument"},
      {R"SH(head -c 3000 /bin/sh > "$MNT/cmd")SH", "Invalid argument"},
      {R"SH(echo '{"cmd": "true", "timeoutSec": 1e400}' > "$MNT/cmd")SH", "Invalid argument"},
      {R"SH(echo "{\"cmd\": \"true\", \"note\": $(printf '%.0s[' $(seq 3000))}" > "$MNT/cmd")SH", "Invalid argument"},
      {R"SH(echo '{"cmd": "true", "name": "../../etc"}' > "$MNT/cmd")SH", "Invalid argument"},
      {R"SH(echo "{\"cmd\": \"true\", \"name\": \"$(printf 'n%.0s' $(seq 300))\"}" > "$MNT/cmd")SH", "File name too long"},
      {R"SH(echo "log $(head -c 8000 /dev/zero | tr '\0' x)" > "$MNT/procs/run/ready")SH", "Argument list too long"},
      {R"SH(echo 'port 99999999999999999999' > "$MNT/procs/run/ready")SH", "Invalid argument"},
      {R"SH(echo KILLME > "$MNT/procs/run/signal")SH", "Invalid argument"},
      {R"SH(mkdir "$MNT/procs/$(printf 'n%.0s' $(seq 300))")SH", "File name too long"},
  };
  for (const Line& l : lines) {
    SCOPED_TRACE(l.script.substr(0, 80));
    const std::size_t errs_before = errors().size();
    const RunResult r = bash(l.script, 10);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find(l.message), std::string::npos) << r.err.substr(0, 300);
    EXPECT_EQ(errors().size(), errs_before + 1);
  }
  EXPECT_EQ(procs(), before);
  EXPECT_EQ(status_json("run")["state"], "running");
  expect_alive();
}


// A rejected request never shows a secret: not in `errors` (its reason or
// its request), not in the read-back on the same open file. Secrets come
// from --secrets-file or from the request's own secretEnv.
using MaskedErrorsTest = SbxfsTest;

TEST_F(MaskedErrorsTest, ReasonsAndReadBacksAreMasked) {
  struct Leak {
    std::string what;
    std::string file;
    std::string request;
    int err;
    std::string secret;  ///< must not come out
  };
  // The daemon again, with a secrets file.
  const std::string g = "hunter2-global-secret";
  ASSERT_EQ(write_file(dir_ + "/secrets", "API_KEY=" + g + "\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  ASSERT_TRUE(start_daemon({"--secrets-file", dir_ + "/secrets"})) << daemon_log();
  const std::vector<Leak> leaks = {
      {"global secret in a cwd", "cmd", R"({"cmd": "true", "cwd": "/no/such/)" + g + "\"}\n", ENOENT, g},
      {"secretEnv value as argv[0]", "cmd",
       R"({"argv": ["/no/such/tok-s3cr3t-value"], "secretEnv": {"TOKEN": "tok-s3cr3t-value"}})" "\n", ENOENT,
       "tok-s3cr3t-value"},
      {"secretEnv value as an unknown key", "cmd",
       R"({"cmd": "true", "secretEnv": {"T": "zz-key-secret"}, "zz-key-secret": 1})" "\n", EINVAL, "zz-key-secret"},
      {"a secret that holds a quote", "cmd",
       R"({"cmd": "true", "cwd": "/no/quo\"te-secret", "secretEnv": {"T": "quo\"te-secret"}})" "\n", ENOENT,
       "te-secret"},
      // JSON may spell a value with escapes (Python's json.dumps writes \u00e9 for é).
      {"secretEnv value spelt with a \\u escape", "cmd",
       R"({"cmd": "true", "secretEnv": {"X": "h\u00e9llo-secret"}, "h\u00e9llo-secret": 1})" "\n", EINVAL, "llo-secret"},
      {"secretEnv value spelt with \\/", "cmd",
       R"({"cmd": "true", "secretEnv": {"X": "tok\/zq9\/xyz"}, "tok\/zq9\/xyz": 1})" "\n", EINVAL, "zq9"},
      {"global secret spelt with a \\u escape", "cmd",
       R"({"cmd": "true", "cwd": "/no/such/\u0068unter2-global-secret"})" "\n", ENOENT, "unter2-global"},
      {"global secret in a slot's cwd", "procs/run/cmd", R"({"cmd": "true", "cwd": "/x/)" + g + "\"}\n", ENOENT, g},
      {"global secret in a ready regex", "procs/run/ready", "log " + g + "(\n", EINVAL, g},
      {"global secret in a signal", "procs/run/signal", "SIG" + g + "\n", EINVAL, g},
      {"global secret in a mkdir name", "procs/" + g + " x", "", EINVAL, g},
  };
  ASSERT_EQ(start(R"({"cmd": "sleep 60", "name": "run"})"), "run");
  for (const Leak& l : leaks) {
    SCOPED_TRACE(l.what);
    const std::size_t errs_before = errors().size();
    if (l.request.empty()) {
      EXPECT_EQ(mkdir_errno(p(l.file)), l.err);
    } else {
      const bool is_cmd = l.file.size() >= 3 && l.file.compare(l.file.size() - 3, 3, "cmd") == 0;
      const Exchange x = exchange(p(l.file), l.request, is_cmd);
      EXPECT_EQ(x.err, l.err) << errno_name(x.err);
      if (is_cmd) {
        EXPECT_EQ(x.readback.find(l.secret), std::string::npos) << x.readback;
        EXPECT_NE(x.readback.find("****"), std::string::npos) << x.readback;
      }
    }
    const auto errs = errors();
    ASSERT_EQ(errs.size(), errs_before + 1);
    const std::string line = errs.back().dump();
    EXPECT_EQ(line.find(l.secret), std::string::npos) << line;
  }
  // The whole file, raw, once more.
  const std::string raw = file("errors");
  EXPECT_EQ(raw.find(g), std::string::npos);
  EXPECT_EQ(raw.find("s3cr3t"), std::string::npos);
  // The refused starts are steps of the box too, shown in steps.json.
  const std::string steps = file("steps.json");
  for (const char* secret : {"hunter2", "s3cr3t", "llo-secret", "zq9", "unter2-global", "te-secret"})
    EXPECT_EQ(steps.find(secret), std::string::npos) << secret << " in " << steps;
}

}  // namespace
}  // namespace sbxit
