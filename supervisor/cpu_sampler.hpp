#pragma once
// The `cpu` figure of running commands: %CPU of a monitor's whole tree since
// its previous sample, a sample being one walk of the tree in /proc (one
// pass over /proc serves all the trees sampled together), or with a cgroup
// one read of its cpu.stat, which counts every member; the
// first sample of a tree measures from the monitor's start. A command is
// sampled only when an answer shows its figure, and at most once an
// interval: an idle supervisor samples nothing.
//
// Thread-safe. A read samples on its own thread what is older than the
// interval, so its answer is fresh, within a time budget per read: with very
// many commands the ones past the budget show their last figure and are
// resampled on a background thread ("sbx-cpu", asleep otherwise), so that
// a listing of thousands stays fast.
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "supervisor/proc_tree.hpp"
#include "supervisor/unique_fd.hpp"

namespace sup {

class CpuSampler {
 public:
  struct Tree {
    std::string id;
    pid_t monitor = 0;
    std::string cgroup = {};  ///< non-empty: its cpu.stat counts, not a walk of /proc
  };

  /// `interval`: the least time between two samples of a command. `budget`:
  /// how long one call of percents() samples trees on the caller's thread at
  /// most, after the one pass over /proc they share.
  explicit CpuSampler(std::chrono::milliseconds interval = std::chrono::seconds(1),
                      std::chrono::milliseconds budget = std::chrono::milliseconds(10))
      : interval_(interval), budget_(budget) {}
  ~CpuSampler();  ///< stops and joins the background thread
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;

  /// One command: samples its tree now when the last sample is older than
  /// the interval (a few /proc reads), then answers.
  double percent(const Tree& t);
  /// Many commands, in the order of `trees`: those whose last sample is older
  /// than the interval are sampled now, the oldest first, within the budget;
  /// the rest answer their last figure (0 if none) and are resampled in the
  /// background.
  std::vector<double> percents(const std::vector<Tree>& trees);
  /// Drops what is known of `id` (it ended, or its bgId starts a new command).
  void forget(const std::string& id);

 private:
  using Clock = std::chrono::steady_clock;
  struct Sample {
    std::uint64_t ticks = 0;
    Clock::time_point at{};
    double percent = 0;
    bool busy = false;  // being sampled (by a caller or the background thread)
    // A cgroup's cpu.stat, kept open: a sample of 1000 cgroups is then 1000
    // pread(2)s. Shared with a sampler that reads it while forget() drops it.
    std::shared_ptr<UniqueFd> cpu_stat;
  };
  bool stale(const Sample& s, Clock::time_point now) const;
  void take(const Tree& t, const std::vector<ProcEntry>& all);  // without mu_, then stores under it
  void run();

  const std::chrono::milliseconds interval_;
  const std::chrono::milliseconds budget_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Sample> samples_;  // guarded by mu_
  std::vector<Tree> queue_;                // guarded by mu_
  bool stop_ = false;                      // guarded by mu_
  std::thread worker_;                     // started at the first queued sample
};

}  // namespace sup
