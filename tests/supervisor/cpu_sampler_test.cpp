// The cpu figure: a busy tree shows up, an idle one does not; a single
// status samples on the spot, a listing only in the background.
#include "supervisor/cpu_sampler.hpp"

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

TEST(CpuSamplerTest, StatusSamplesOnTheSpot) {
  Group busy(kBusy), idle(kIdle);
  sup::CpuSampler s(std::chrono::milliseconds(100));
  EXPECT_EQ(s.percent({"busy", busy.pid()}), 0) << "one sample is no figure yet";
  EXPECT_TRUE(wait_until([&] { return s.percent({"busy", busy.pid()}) > 5; }, 3000ms, 50ms));
  EXPECT_TRUE(wait_until([&] { return s.percent({"idle", idle.pid()}) < 5; }, 3000ms, 50ms));
  // Within the interval the figure is reused, not resampled.
  const double a = s.percent({"busy", busy.pid()});
  EXPECT_EQ(s.percent({"busy", busy.pid()}), a);
}

TEST(CpuSamplerTest, ListingNeverWaitsAndIsFilledInTheBackground) {
  Group busy(kBusy);
  sup::CpuSampler s(std::chrono::milliseconds(100));
  const std::vector<sup::CpuSampler::Tree> trees = {{"busy", busy.pid()}};
  EXPECT_EQ(s.percents(trees), std::vector<double>{0});
  EXPECT_TRUE(wait_until([&] { return s.percents(trees)[0] > 5; }, 3000ms, 50ms));
  s.forget("busy");
  EXPECT_EQ(s.percents(trees), std::vector<double>{0}) << "forgotten: known no more";
}

}  // namespace
