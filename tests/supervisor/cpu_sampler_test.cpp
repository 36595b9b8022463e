// The cpu figure: a busy tree shows up, an idle one does not; a status and
// a listing sample on the spot (a listing within its time budget).
#include "supervisor/cpu_sampler.hpp"

#include <signal.h>
#include <unistd.h>

#include "supervisor/proc_tree.hpp"

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

/// `sh -c SCRIPT` in its own process group; the group is killed on destruction.
class Group {
 public:
  explicit Group(const std::string& script) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(pid_, pid_);
  }
  ~Group() {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_;
};

// The root stands for the monitor: its descendants are the tree.
constexpr const char* kBusy = "while :; do :; done & wait";
constexpr const char* kIdle = "sleep 30 & wait";

/// Waits until the tree has used at least `ticks` of CPU (its own count, not the sampler's).
bool burned(pid_t root, std::uint64_t ticks) {
  return wait_until([&] { return sup::tree_cpu_ticks(root) >= ticks; }, 10000ms, 20ms);
}

/// Every process of the tree is stopped (state T).
bool stopped(pid_t root) {
  std::vector<pid_t> all = sup::descendants(root);
  all.push_back(root);
  for (pid_t p : all)
    if (read_file("/proc/" + std::to_string(p) + "/stat").find(") T ") == std::string::npos) return false;
  return true;
}

const std::uint64_t kHz = static_cast<std::uint64_t>(::sysconf(_SC_CLK_TCK));

TEST(CpuSamplerTest, StatusSamplesOnTheSpot) {
  Group busy(kBusy), idle(kIdle);
  ASSERT_TRUE(burned(busy.pid(), kHz / 4));
  sup::CpuSampler s(std::chrono::milliseconds(100));
  EXPECT_GT(s.percent({"busy", busy.pid()}), 10) << "the first sample measures from the start";
  EXPECT_LT(s.percent({"idle", idle.pid()}), 5);
  // Within the interval the figure is reused, not resampled.
  const double a = s.percent({"busy", busy.pid()});
  EXPECT_EQ(s.percent({"busy", busy.pid()}), a);
}

// A listing answers with figures sampled for it: the first read already
// shows a busy tree, and a change shows in the first read after it.
TEST(CpuSamplerTest, ListingIsFreshAtEveryRead) {
  Group busy(kBusy), idle(kIdle);
  ASSERT_TRUE(burned(busy.pid(), kHz / 4));
  sup::CpuSampler s(std::chrono::milliseconds(0));
  const std::vector<sup::CpuSampler::Tree> trees = {{"busy", busy.pid()}, {"idle", idle.pid()}};
  std::vector<double> first = s.percents(trees);
  EXPECT_GT(first[0], 10);
  EXPECT_LT(first[1], 5);
  // Stopped: the next read covers only stopped time.
  ASSERT_EQ(::kill(-busy.pid(), SIGSTOP), 0);
  ASSERT_TRUE(wait_until([&] { return stopped(busy.pid()); }, 3000ms));
  (void)s.percents(trees);
  EXPECT_EQ(s.percents(trees)[0], 0) << "stopped, yet busy";
  // Running again: the first read after it says so.
  const std::uint64_t before = sup::tree_cpu_ticks(busy.pid());
  ASSERT_EQ(::kill(-busy.pid(), SIGCONT), 0);
  ASSERT_TRUE(burned(busy.pid(), before + kHz / 4));
  EXPECT_GT(s.percents(trees)[0], 10) << "running again, yet idle";
}

// Past its budget a listing shows the last figures and fills them in the
// background, for the next read.
TEST(CpuSamplerTest, PastTheBudgetListingsAreFilledInTheBackground) {
  Group busy(kBusy);
  sup::CpuSampler s(std::chrono::milliseconds(100), std::chrono::milliseconds(0));
  const std::vector<sup::CpuSampler::Tree> trees = {{"busy", busy.pid()}};
  EXPECT_EQ(s.percents(trees), std::vector<double>{0});
  EXPECT_TRUE(wait_until([&] { return s.percents(trees)[0] > 5; }, 3000ms, 50ms));
  s.forget("busy");
  EXPECT_EQ(s.percents(trees), std::vector<double>{0}) << "forgotten: known no more";
}

}  // namespace
