#pragma once
// The `cpu` figure of running commands: %CPU of a monitor's whole tree over
// the last interval between two samples, a sample being one walk of the
// tree in /proc. A command is sampled at most once a second, and only when
// somebody asks: an idle supervisor samples nothing.
//
// Thread-safe. One background thread ("sbx-cpu"), asleep unless a listing
// asked for fresh figures, so that a listing of many commands never walks
// /proc on the caller's thread.
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sup {

class CpuSampler {
 public:
  struct Tree {
    std::string id;
    pid_t monitor = 0;
  };

  /// `interval`: the least time between two samples of a command.
  explicit CpuSampler(std::chrono::milliseconds interval = std::chrono::seconds(1)) : interval_(interval) {}
  ~CpuSampler();  ///< stops and joins the background thread
  CpuSampler(const CpuSampler&) = delete;
  CpuSampler& operator=(const CpuSampler&) = delete;

  /// One command: samples its tree now when the last sample is older than
  /// the interval (a few /proc reads), then answers. 0 until two samples exist.
  double percent(const Tree& t);
  /// Many commands: the figures as they are, in the order of `trees`;
  /// those older than the interval are resampled in the background, for the next call.
  std::vector<double> percents(const std::vector<Tree>& trees);
  /// Drops what is known of `id` (it ended, or its bgId starts a new command).
  void forget(const std::string& id);

 private:
  using Clock = std::chrono::steady_clock;
  struct Sample {
    std::uint64_t ticks = 0;
    Clock::time_point at{};
    double percent = 0;
    bool queued = false;
  };
  bool stale(const Sample& s, Clock::time_point now) const;
  void take(const Tree& t);  // walks without mu_, then stores under it
  void run();

  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Sample> samples_;  // guarded by mu_
  std::vector<Tree> queue_;                // guarded by mu_
  bool stop_ = false;                      // guarded by mu_
  std::thread worker_;                     // started at the first queued sample
};

}  // namespace sup
