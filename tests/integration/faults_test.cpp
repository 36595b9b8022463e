// Faults: the state directory's disk full, a monitor killed with SIGKILL,
// the daemon out of file descriptors. The daemon stays up, a refused request
// gets a fitting errno and a line in `errors`, nothing is half-created, the
// record says what happened, and everything works again once the fault is
// gone.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

/// Sorted entries of a directory (hidden ones included).
std::vector<std::string> sorted_dir(const std::string& path) {
  auto v = list_dir(path);
  std::sort(v.begin(), v.end());
  return v;
}

/// open(O_RDWR), write, read the answer back, close: the errno of the first
/// failing call (0: none) and the answer.
std::pair<int, std::string> request(const std::string& cmd_path, const std::string& req) {
  const int fd = ::open(cmd_path.c_str(), O_RDWR);
  if (fd < 0) return {errno, ""};
  int err = 0;
  if (::write(fd, req.data(), req.size()) < 0) err = errno;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  if (::close(fd) != 0 && err == 0) err = errno;
  return {err, n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : ""};
}

/// The pids of the live processes whose environment holds every one of `marks`.
std::vector<pid_t> processes_with(const std::vector<std::string>& marks) {
  std::vector<pid_t> out;
  for (const std::string& e : list_dir("/proc")) {
    if (e.empty() || e.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(e);
    const std::string env = read_file("/proc/" + e + "/environ").data;
    bool all = !env.empty();
    for (const std::string& m : marks) all = all && env.find(std::string("\0", 1) + m + '\0') != std::string::npos;
    if (all && pid_alive(pid)) out.push_back(pid);
  }
  return out;
}

// ---------------------------------------------------------------- disk full

/// The daemon on a 1 MiB tmpfs as its state directory.
class DiskFullTest : public SbxfsTest {
 protected:
  void SetUp() override {
    SbxfsTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(kill_daemon(SIGTERM), 0) << daemon_log();
    ASSERT_EQ(::mount("tmpfs", state_.c_str(), "tmpfs", 0, "size=1m,mode=0700"), 0) << std::strerror(errno);
    tmpfs_ = true;
    ASSERT_TRUE(start_daemon()) << daemon_log();
  }

  void TearDown() override {
    if (tmpfs_) {
      // Everything that uses the tmpfs ends before it goes.
      run(R"(for d in "$MNT"/procs/*; do timeout 10 sh -c 'echo > "$1/stop"' _ "$d" 2>/dev/null; done)", 30);
      if (daemon_pid() > 0 && kill_daemon(SIGTERM) == -2) kill_daemon(SIGKILL);
      ::umount2(state_.c_str(), MNT_DETACH);
    }
    SbxfsTest::TearDown();
  }

  /// Fills the tmpfs with a file of our own until it is full.
  void fill() {
    const int fd = ::open((state_ + "/filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    const std::string block(4096, 'f');
    while (::write(fd, block.data(), block.size()) > 0) {
    }
    EXPECT_EQ(errno, ENOSPC);
    ::close(fd);
  }
  void unfill() { ASSERT_EQ(::unlink((state_ + "/filler").c_str()), 0); }

  bool tmpfs_ = false;
};

TEST_F(DiskFullTest, AStartThatCannotWriteItsRecordFailsCleanly) {
  fill();
  const auto procs_before = procs();
  const auto state_before = sorted_dir(state_ + "/procs");
  const std::size_t errs_before = errors().size();

  const auto [err, answer] = request(p("cmd"), "echo hi\n");
  EXPECT_EQ(err, ENOSPC) << errno_name(err);
  EXPECT_EQ(answer.rfind("error: ENOSPC: ", 0), 0u) << answer;
  EXPECT_EQ(mkdir_errno(p("procs/slot")), ENOSPC);

  auto errs = errors();
  ASSERT_EQ(errs.size(), errs_before + 2);
  EXPECT_EQ(errs[errs.size() - 2]["errno"], "ENOSPC");
  EXPECT_EQ(errs[errs.size() - 2]["path"], "cmd");
  EXPECT_EQ(errs.back()["errno"], "ENOSPC");
  EXPECT_EQ(procs(), procs_before) << "nothing is half-created";
  EXPECT_EQ(sorted_dir(state_ + "/procs"), state_before);
  EXPECT_TRUE(root_status().is_object()) << "the daemon answers";

  // Space again: everything works.
  unfill();
  const std::string id = start("echo back");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(wait_ended(id)["exitCode"], 0);
  EXPECT_EQ(log(id), "back\n");
  EXPECT_EQ(mkdir_errno(p("procs/slot")), 0);
}

// Space comes back a page at a time, with no folder made ahead (the full
// disk used them up): at some page a start has room for its request and
// its start but not for its end. It must fail then, not run a command
// whose end can never be written.
TEST_F(DiskFullTest, EveryStartThatRanGetsItsEndRecorded) {
  fill();
  for (int i = 0; i < 12; ++i) EXPECT_EQ(request(p("cmd"), "echo used-up\n").first, ENOSPC);
  const std::string filler = state_ + "/filler";
  struct stat st {};
  ASSERT_EQ(::stat(filler.c_str(), &st), 0);
  int started = 0;
  for (off_t size = st.st_size; size > st.st_size - 16 * 4096; size -= 4096) {
    ASSERT_EQ(::truncate(filler.c_str(), size), 0);
    const auto before = procs();
    const auto [err, answer] = request(p("cmd"), "echo page\n");
    if (err != 0) {
      EXPECT_EQ(err, ENOSPC) << errno_name(err) << " " << answer;
      EXPECT_EQ(procs(), before) << "nothing is half-created";
      continue;
    }
    ++started;
    const std::string id = answer.substr(0, answer.find('\n'));
    const json end = wait_ended(id);
    EXPECT_EQ(end["endReason"], "exited") << "at " << (st.st_size - size) / 4096 << " pages: " << end.dump();
    EXPECT_EQ(end["exitCode"], 0) << end.dump();
    EXPECT_EQ(stat_errno(state_ + "/procs/" + id + "/exit.json"), 0) << id;
  }
  EXPECT_GT(started, 0);
}

// Many small writes into a log whose block has room left, once the index
// has none: what the log shows and what the record counts as lost add up
// to what the command wrote (bytes no index entry tells were hidden and
// counted nowhere).
TEST_F(DiskFullTest, WhatTheLogShowsAndWhatIsCountedLostAddUp) {
  const std::string go = dir_ + "/go";
  const std::string id = start("echo begin; while [ ! -e '" + go +
                               "' ]; do sleep 0.01; done; i=0; while [ $i -lt 300 ]; do echo $i; i=$((i+1)); sleep 0.002; done");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id) == "begin\n"; }, 5s));
  fill();
  ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT | O_TRUNC), 0);
  const json st = wait_ended(id, 30s);
  EXPECT_EQ(st["exitCode"], 0) << st.dump();
  const std::size_t written = 6 + 10 * 2 + 90 * 3 + 200 * 4;  // begin, then 0..299
  const std::string shown = log(id);
  const long long lost = st.value("outputLost", 0LL);
  EXPECT_GT(lost, 0) << "the index filled up first: each line is a read of its own (a sleep between them)";
  EXPECT_EQ(shown.size() + static_cast<std::size_t>(lost), written) << "shown " << shown.size() << ", lost " << lost;
  EXPECT_EQ(shown.rfind("begin\n0\n1\n", 0), 0u) << shown.substr(0, 40);
  EXPECT_EQ(file("procs/" + id + "/stdout"), shown);
}

TEST_F(DiskFullTest, ACommandWritingPastTheSpaceRunsOnAndItsRecordSaysWhatWasLost) {
  // 2 MB of output (4 MB with the log) into 1 MiB: the disk fills while it runs.
  const std::string id = start("echo begin; head -c 2000000 /dev/zero | tr '\\0' x; echo; echo end");
  ASSERT_FALSE(id.empty());
  const json st = wait_ended(id);
  EXPECT_EQ(st["state"], "exited") << st.dump();
  EXPECT_EQ(st["exitCode"], 0) << "the command never noticed: " << st.dump();
  EXPECT_EQ(st["endReason"], "exited");
  ASSERT_TRUE(st.contains("outputLost")) << st.dump();
  EXPECT_GT(st["outputLost"].get<long long>(), 0) << st.dump();
  EXPECT_EQ(log(id).rfind("begin\n", 0), 0u);

  // Full now: the daemon still answers, a start is refused cleanly.
  const auto procs_before = procs();
  const auto [err, answer] = request(p("cmd"), "echo hi\n");
  EXPECT_EQ(err, ENOSPC) << errno_name(err) << " " << answer;
  EXPECT_EQ(procs(), procs_before);

  // Removing the record frees the space.
  ASSERT_EQ(rmdir_errno(p("procs/" + id)), 0);
  const std::string again = start("echo again");
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(wait_ended(again)["exitCode"], 0);
  EXPECT_EQ(log(again), "again\n");
}

// ---------------------------------------------------------------- killed monitor

using KilledMonitorTest = SbxfsTest;

TEST_F(KilledMonitorTest, TheRecordSaysSoAndNoProcessIsLeft) {
  // A tree with a background job, a setsid'd child and a daemonized
  // grandchild (its parent gone, so the monitor had adopted it).
  const std::string id =
      start(R"({"cmd": "sleep 300 & setsid sleep 301 & (setsid sleep 302 &); exec sleep 303", "name": "victim"})");
  ASSERT_EQ(id, "victim");
  const json mon = parse_json(read_file(state_ + "/procs/victim/monitor.json").data);
  ASSERT_TRUE(mon.is_object());
  const pid_t monitor = mon["monitorPid"].get<pid_t>();
  ASSERT_GT(monitor, 1);
  // The 4 sleeps (the monitor, forked by the monitor server, keeps the
  // server's environment: only the command gets the request's).
  const std::vector<std::string> marks = {"SBX_BGID=victim", "SBX_IT_DIR=" + dir_};
  ASSERT_TRUE(wait_until([&] { return processes_with(marks).size() == 4; }, 5s))
      << processes_with(marks).size() << " processes";

  ASSERT_EQ(::kill(monitor, SIGKILL), 0);
  const json st = wait_ended(id, 15s);
  EXPECT_EQ(st["running"], false) << st.dump();
  EXPECT_EQ(st["endReason"], "unknown") << st.dump();
  EXPECT_EQ(st["exitCode"], -1) << st.dump();
  ASSERT_TRUE(st["endNote"].is_string()) << st.dump();
  EXPECT_NE(st["endNote"].get<std::string>().find("monitor"), std::string::npos) << st.dump();

  // stop still succeeds, and nothing of the tree is left.
  EXPECT_EQ(write_file(p("procs/victim/stop"), "\n"), 0);
  EXPECT_TRUE(wait_until([&] { return processes_with(marks).empty(); }, 10s))
      << processes_with(marks).size() << " processes left";
  // The daemon carries on.
  const std::string next = start("echo fine");
  ASSERT_FALSE(next.empty());
  EXPECT_EQ(wait_ended(next)["exitCode"], 0);
}

// ---------------------------------------------------------------- fd exhaustion

using FdExhaustionTest = SbxfsTest;

TEST_F(FdExhaustionTest, AClearErrorThenRecovery) {
  const std::string running = start("echo running; exec sleep 60");
  ASSERT_FALSE(running.empty());
  const std::string done = start("echo output");
  ASSERT_FALSE(done.empty());
  wait_ended(done);
  ASSERT_TRUE(wait_until([&] { return log(running) == "running\n"; }, 5s));

  // Lower the daemon's limit to a few more than it holds now (as
  // `prlimit --nofile=N` would), then hold open log files, each of which
  // the daemon keeps open, until it has none left (a running command's: an
  // ended one's is read from the kernel's cache after the first read).
  const pid_t pid = daemon_pid();
  // One count for both limits: the daemon's descriptors come and go, and a
  // soft limit above the hard one is EINVAL.
  const auto limit = static_cast<rlim_t>(list_dir("/proc/" + std::to_string(pid) + "/fd").size() + 8);
  const rlimit lim{limit, limit};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &lim, nullptr), 0) << std::strerror(errno);
  std::vector<int> held;
  for (int i = 0; i < 64; ++i) {
    const int fd = ::open(p("procs/" + running + "/log").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    held.push_back(fd);
    char c;
    if (::read(fd, &c, 1) < 0) break;  // the daemon could not open the backing file
  }
  char c;
  EXPECT_EQ(::read(held.back(), &c, 1), -1);
  EXPECT_EQ(errno, EMFILE) << "a read of log says why";

  const std::size_t errs_before = errors().size();
  const auto procs_before = procs();
  const auto [err, answer] = request(p("cmd"), "echo hi\n");
  EXPECT_EQ(err, EMFILE) << errno_name(err) << " " << answer;
  EXPECT_EQ(answer.rfind("error: EMFILE: ", 0), 0u) << answer;
  auto errs = errors();
  ASSERT_EQ(errs.size(), errs_before + 1);
  EXPECT_EQ(errs.back()["errno"], "EMFILE");
  EXPECT_EQ(procs(), procs_before) << "nothing is half-created";
  EXPECT_EQ(status_json(running)["state"], "running") << "a running command is unharmed";

  // Free them: everything works again.
  for (int fd : held) ::close(fd);
  const std::string after = start("echo after");
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(wait_ended(after)["exitCode"], 0);
  EXPECT_EQ(log(after), "after\n");
  EXPECT_EQ(log(done), "output\n");
  EXPECT_EQ(write_file(p("procs/" + running + "/stop"), "\n"), 0);
  EXPECT_EQ(wait_ended(running)["endReason"], "stopped");
}

}  // namespace
}  // namespace sbxit
