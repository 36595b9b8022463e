// The monitor fork server (supervisor/monitor_launcher.*, monitor/server.cpp)
// and the monitor's own command-line form.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>

#include <cstring>

#include "supervisor/log_view.hpp"
#include "supervisor/monitor_launcher.hpp"
#include "test_util.hpp"

namespace {

using namespace sbxtest;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override { marker_ = "SBX_TEST_MARKER=sbxut-" + std::to_string(::getpid()) + "-launcher"; }
  void TearDown() override { EXPECT_TRUE(kill_marked(marker_)); }

  // A fresh record folder and a launch of `argv` into it.
  sup::MonitorLaunch job(const std::string& name, std::vector<std::string> argv) {
    const std::string dir = tmp_ / name;
    fs::create_directories(dir);
    sup::MonitorLaunch l;
    l.record_dir = dir;
    l.argv = std::move(argv);
    l.cwd = tmp_.path();
    l.env = {{"PATH", "/usr/bin:/bin"}, {"SBX_TEST_MARKER", marker_.substr(marker_.find('=') + 1)}};
    return l;
  }
  // A launch that publishes nothing.
  static sup::Result<pid_t> launch(sup::MonitorLauncher& launcher, const sup::MonitorLaunch& l) {
    return launcher.launch(l, [](pid_t) -> sup::Status { return sup::Ok{}; });
  }
  // exit.json of a finished launch (waits for it).
  std::optional<nlohmann::json> exit_of(const std::string& name) {
    const std::string path = tmp_ / name + "/exit.json";
    if (!wait_until([&] { return file_exists(path); }, 10000ms)) return std::nullopt;
    return read_json(path);
  }

  // `sbxfs-monitor --dir DIR -- COMMAND...` run by hand; its report, once it has exited 0.
  std::string run_by_hand(const std::string& dir, const std::vector<std::string>& command) {
    fs::create_directories(dir);
    int out[2];
    if (::pipe(out) != 0) return "pipe failed";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::string env0 = marker_;
    std::vector<std::string> args = {SBX_MONITOR_PATH, "--dir", dir, "--"};
    args.insert(args.end(), command.begin(), command.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    char* envp[] = {env0.data(), nullptr};
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, SBX_MONITOR_PATH, &fa, nullptr, argv.data(), envp);
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    std::string report;
    char buf[256];
    for (ssize_t n; rc == 0 && (n = ::read(out[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    if (rc != 0) return "posix_spawn failed";
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return "the monitor did not exit 0: " + report;
    return report;
  }

  TempDir tmp_{"sbx-launch"};
  std::string marker_;
};

TEST_F(LauncherTest, RunsTheCommandWithItsEnvironmentAndCwd) {
  sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
  auto l = job("a", {"/bin/sh", "-c", "echo \"$GREETING\" \"$(pwd)\""});
  l.env["GREETING"] = "hello";
  auto pid = launch(launcher, l);
  SBX_ASSERT_OK(pid);
  EXPECT_GT(pid.value(), 0);
  auto ex = exit_of("a");
  ASSERT_TRUE(ex);
  EXPECT_EQ((*ex)["exitCode"], 0) << ex->dump();
  EXPECT_EQ(read_file(tmp_ / "a/log"), "hello " + tmp_.path() + "\n");
  EXPECT_EQ(read_stream(tmp_ / "a/stdout"), "hello " + tmp_.path() + "\n");
  // The streams have no files of their own: the log and its index hold them.
  EXPECT_FALSE(file_exists(tmp_ / "a/stderr"));
  // ctl stays after the end, with no reader once the monitor has exited
  // (a moment after exit.json).
  EXPECT_TRUE(file_exists(tmp_ / "a/ctl"));
  int err = 0;
  EXPECT_TRUE(wait_until([&] {
    const int fd = ::open((tmp_ / "a/ctl").c_str(), O_WRONLY | O_NONBLOCK);
    err = fd < 0 ? errno : 0;
    if (fd >= 0) ::close(fd);
    return err == ENXIO;
  }, 10000ms)) << "errno " << err;
}

// Each byte is written once, to the log; the index says which stream each
// chunk came from, so no stream has a file of its own.
TEST_F(LauncherTest, EachByteIsWrittenOnceAndIndexed) {
  sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
  const std::string go = tmp_ / "go";
  auto l = job("s", {"/bin/sh", "-c", "echo a; while [ ! -e '" + go + "' ]; do sleep 0.01; done; echo b >&2; echo c"});
  SBX_ASSERT_OK(launch(launcher, l));
  const std::string d = tmp_ / "s";
  ASSERT_TRUE(wait_for_text(d + "/log", "a\n", 5000ms));
  write_file(go, "");
  ASSERT_TRUE(exit_of("s"));
  const std::string log_text = read_file(d + "/log");  // b and c: in the order the monitor read them
  EXPECT_TRUE(log_text == "a\nb\nc\n" || log_text == "a\nc\nb\n") << log_text;
  EXPECT_EQ(read_stream(d + "/stdout"), "a\nc\n");
  EXPECT_EQ(read_stream(d + "/stderr"), "b\n");
  EXPECT_FALSE(file_exists(d + "/stdout"));
  EXPECT_FALSE(file_exists(d + "/stderr"));
  sup::LogIndex index;
  ASSERT_EQ(index.open(d), 0);
  std::uint64_t at = 0;
  for (const sup::LogChunk& c : index.chunks()) {  // the chunks cover the log, in order
    EXPECT_EQ(c.offset, at);
    at += c.length;
  }
  EXPECT_EQ(at, log_text.size());
  EXPECT_EQ(read_file(d + "/index").size(), sup::kIndexHeaderSize + index.chunks().size() * sup::kIndexEntrySize);
}

// stderr alone, past log_max: one marker, in the log and so in stderr, then its latest bytes.
TEST_F(LauncherTest, AStreamPastLogMaxHasOneMarker) {
  sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
  auto l = job("m", {"/bin/sh", "-c", "head -c 3000 /dev/zero | tr '\\0' x >&2"});
  l.log_max = 1000;
  SBX_ASSERT_OK(launch(launcher, l));
  ASSERT_TRUE(exit_of("m"));
  const std::string log = sup::log_view_end(tmp_ / "m", sup::LogSelection::all, SIZE_MAX, {}, 0, false).value_or("");
  EXPECT_EQ(log, sup::log_view_end(tmp_ / "m", sup::LogSelection::err, SIZE_MAX, {}, 0, false).value_or(""));
  EXPECT_EQ(log.rfind(std::string(500, 'x') + "\n[sbxfs: log_max (1000 bytes) reached", 0), 0u) << log;
  EXPECT_EQ(log.find("[sbxfs"), log.rfind("[sbxfs")) << log;
  EXPECT_TRUE(log.ends_with("xxx")) << log;
  EXPECT_FALSE(file_exists(tmp_ / "m/stdout"));
}

// The record is published between the fork and the exec: the command can
// find it from its first instruction; a failed publish means no exec.
TEST_F(LauncherTest, PublishComesBeforeTheExecAndCanCancelIt) {
  sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
  const std::string made = tmp_ / "made";
  auto l = job("p", {"/usr/bin/touch", made});
  std::string seen_cmdline;
  bool had_monitor_json = false;
  auto r = launcher.launch(l, [&](pid_t pid) -> sup::Status {
    seen_cmdline = proc_cmdline(pid);
    had_monitor_json = file_exists(tmp_ / "p/monitor.json");
    return sup::Ok{};
  });
  SBX_ASSERT_OK(r);
  EXPECT_EQ(seen_cmdline.find("touch"), std::string::npos) << "exec'd before the publish: " << seen_cmdline;
  EXPECT_TRUE(had_monitor_json);
  ASSERT_TRUE(exit_of("p"));
  EXPECT_TRUE(file_exists(made));

  const std::string never = tmp_ / "never";
  l = job("q", {"/usr/bin/touch", never});
  r = launcher.launch(l, [](pid_t) -> sup::Status { return sup::Error{sup::Errc::no_space, "no room"}; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "no room");
  EXPECT_FALSE(file_exists(never)) << "the command ran although its start was cancelled";
  EXPECT_FALSE(file_exists(tmp_ / "q/monitor.json"));
  EXPECT_FALSE(file_exists(tmp_ / "q/exit.json"));
}

TEST_F(LauncherTest, ExecFailureAndBadCwdAreErrors) {
  sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
  auto r = launch(launcher, job("b", {"/nonexistent/program"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, sup::Errc::not_found) << describe(r.error());
  EXPECT_NE(r.error().message.find("/nonexistent/program"), std::string::npos) << r.error().message;

  auto l = job("c", {"/bin/true"});
  l.cwd = tmp_ / "gone";
  r = launch(launcher, l);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, sup::Errc::not_found) << describe(r.error());
  EXPECT_NE(r.error().message.find("gone"), std::string::npos) << r.error().message;
  EXPECT_FALSE(file_exists(tmp_ / "c/monitor.json"));
}

TEST_F(LauncherTest, AJobLargerThanASocketBufferArrivesWhole) {
  sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
  // 16 x 64 KiB = 1 MiB: past any socket or pipe buffer (one exec string
  // may hold at most 128 KiB).
  std::string sum;
  auto l = job("big", {});
  for (int i = 0; i < 16; ++i) {
    l.env["BIG" + std::to_string(i)] = std::string(64 * 1024, static_cast<char>('a' + i));
    sum += "$BIG" + std::to_string(i);
  }
  l.argv = {"/bin/sh", "-c", "printf %s \"" + sum + "\" | wc -c"};
  auto pid = launch(launcher, l);
  SBX_ASSERT_OK(pid);
  auto ex = exit_of("big");
  ASSERT_TRUE(ex);
  EXPECT_EQ((*ex)["exitCode"], 0);
  EXPECT_EQ(read_stream(tmp_ / "big/stdout"), std::to_string(16 * 64 * 1024) + "\n");
}

TEST_F(LauncherTest, AKilledServerIsReplacedAndItsMonitorsLiveOn) {
  sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
  launcher.prestart();
  const pid_t server = launcher.server_pid();
  ASSERT_GT(server, 0);
  auto first = launch(launcher, job("x", {"/bin/sleep", "60"}));
  SBX_ASSERT_OK(first);

  ASSERT_EQ(::kill(server, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { auto f = proc_stat_fields(server); return f.empty() || f[0] == "Z"; }, 5000ms));
  auto second = launch(launcher, job("y", {"/bin/echo", "second"}));
  SBX_ASSERT_OK(second);
  EXPECT_NE(launcher.server_pid(), server);
  auto ex = exit_of("y");
  ASSERT_TRUE(ex);
  EXPECT_EQ(read_file(tmp_ / "y/log"), "second\n");

  // The first command's monitor outlived its server: stop it through ctl.
  ASSERT_TRUE(process_alive(first.value()));
  const int ctl = ::open((tmp_ / "x/ctl").c_str(), O_WRONLY | O_NONBLOCK);  // never blocks
  ASSERT_GE(ctl, 0) << std::strerror(errno);
  EXPECT_EQ(::write(ctl, "term\n", 5), 5);
  ::close(ctl);
  auto ex1 = exit_of("x");
  ASSERT_TRUE(ex1);
  EXPECT_EQ((*ex1)["endReason"], "stopped") << ex1->dump();
}

TEST_F(LauncherTest, AMissingMonitorIsAClearError) {
  sup::MonitorLauncher launcher(tmp_ / "no-such-monitor");
  launcher.prestart();  // fails quietly; the launch says why
  EXPECT_EQ(launcher.server_pid(), -1);
  auto r = launch(launcher, job("m", {"/bin/true"}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, sup::Errc::not_found) << describe(r.error());
  EXPECT_NE(r.error().message.find("no-such-monitor"), std::string::npos) << r.error().message;
}

TEST_F(LauncherTest, TheServerEndsWithItsLauncher) {
  pid_t server = -1;
  {
    sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
    launcher.prestart();
    server = launcher.server_pid();
    ASSERT_GT(server, 0);
  }
  // Reaped by the destructor: the pid no longer names that server.
  auto f = proc_stat_fields(server);
  EXPECT_TRUE(f.empty() || proc_cmdline(server).find("--serve") == std::string::npos) << proc_cmdline(server);
}

TEST_F(LauncherTest, AStoppedServerDoesNotHoldTheLaunchersEnd) {
  pid_t server = -1;
  const auto t0 = std::chrono::steady_clock::now();
  {
    sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
    launcher.prestart();
    server = launcher.server_pid();
    ASSERT_GT(server, 0);
    ASSERT_EQ(::kill(server, SIGSTOP), 0);
  }
  // It would have waited for ever: the end gave it a moment, then killed it.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  auto f = proc_stat_fields(server);
  EXPECT_TRUE(f.empty() || proc_cmdline(server).find("--serve") == std::string::npos) << proc_cmdline(server);
}

// `sbxfs-monitor --dir DIR -- ARGV` run by hand: reports, detaches, records.
TEST_F(LauncherTest, TheCommandLineFormStillWorks) {
  const std::string dir = tmp_ / "cli";
  const std::string report = run_by_hand(dir, {"/bin/echo", "by hand"});
  EXPECT_EQ(report.rfind("ok ", 0), 0u) << report;
  auto ex = exit_of("cli");
  ASSERT_TRUE(ex);
  EXPECT_EQ(read_file(dir + "/log"), "by hand\n");
}


// The command's process starts with every signal at its default, whatever
// the monitor inherited: a daemon started from a script in the background
// (SIGINT and SIGQUIT ignored), under nohup (SIGHUP), or by a program that
// ignores SIGPIPE. exec keeps only ignored dispositions, so those are what
// the monitor must reset, once at its start.
namespace {

// The SigIgn mask of the process that wrote `log` (a `grep SigIgn /proc/self/status`).
unsigned long long sig_ign_of(const std::string& log) {
  const auto at = log.find("SigIgn:");
  if (at == std::string::npos) return ~0ULL;
  return std::strtoull(log.c_str() + at + 7, nullptr, 16);
}

constexpr unsigned long long bit(int sig) { return 1ULL << (sig - 1); }
constexpr unsigned long long kInherited = bit(SIGHUP) | bit(SIGINT) | bit(SIGQUIT) | bit(SIGPIPE) | bit(SIGUSR1);

// Ignores kInherited's signals in this process while alive (so that what it spawns inherits that).
struct IgnoringSignals {
  IgnoringSignals() {
    for (int s : {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGUSR1}) {
      struct sigaction ign {};
      ign.sa_handler = SIG_IGN;
      ::sigaction(s, &ign, &old_[s]);
    }
  }
  ~IgnoringSignals() {
    for (int s : {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGUSR1}) ::sigaction(s, &old_[s], nullptr);
  }
  struct sigaction old_[NSIG] {};
};

}  // namespace

TEST_F(LauncherTest, TheCommandStartsWithDefaultSignalsWhateverTheMonitorInherited) {
  const std::string dir = tmp_ / "sigs";
  std::string report;
  {
    IgnoringSignals ignoring;  // inherited by the monitor run by hand
    report = run_by_hand(dir, {"/bin/grep", "SigIgn", "/proc/self/status"});
  }
  EXPECT_EQ(report.rfind("ok ", 0), 0u) << report;
  ASSERT_TRUE(exit_of("sigs"));
  const std::string log = read_file(dir + "/log");
  EXPECT_EQ(sig_ign_of(log) & kInherited, 0u) << log;
  EXPECT_EQ(sig_ign_of(log), 0u) << log;  // nor whatever else the test ran with
}

TEST_F(LauncherTest, TheServersCommandsStartWithDefaultSignals) {
  IgnoringSignals ignoring;  // the daemon's own, inherited by nothing it starts
  sup::MonitorLauncher launcher(SBX_MONITOR_PATH);
  // Two in a row: the second command's process is started where the first's was.
  for (const char* name : {"sigs1", "sigs2"}) {
    auto pid = launch(launcher, job(name, {"/bin/grep", "SigIgn", "/proc/self/status"}));
    SBX_ASSERT_OK(pid);
    ASSERT_TRUE(exit_of(name));
    const std::string log = read_file(tmp_ / name + "/log");
    // Nothing ignored: not kInherited, nor the C library's own signals (32
    // and 33), which glibc's posix_spawn of the server leaves ignored.
    EXPECT_EQ(sig_ign_of(log), 0u) << log;
  }
}

}  // namespace
