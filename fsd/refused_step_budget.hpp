#pragma once
// How many refused requests of one user the box's steps keep: a step is a
// line kept a week in the state directory, and a refusal costs its writer
// nothing (20 000 of them in 3 s made 10 MB), so each user has a budget:
// kBurst at once, then one a second. What goes past it is counted, and the
// user's next kept refusal says how many were not kept since. Accepted
// starts are never held back (each is a process, and its step is the
// record of what ran).
//
// Thread-safety: locks itself.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

namespace fsd {

class RefusedStepBudget {
 public:
  static constexpr double kBurst = 60;
  static constexpr double kPerSecond = 1;
  using Clock = std::chrono::steady_clock;

  /// Whether `uid`'s refusal at `now` is kept; if so, how many of theirs
  /// were not kept before it (0: none). nullopt: not kept.
  std::optional<std::uint64_t> take(uid_t uid, Clock::time_point now = Clock::now());

 private:
  struct Bucket {
    double tokens = kBurst;
    Clock::time_point at;
    std::uint64_t dropped = 0;
  };
  std::mutex mu_;
  std::map<uid_t, Bucket> buckets_;  // guarded by mu_
};

}  // namespace fsd
