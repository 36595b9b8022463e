#include "fsd/refused_step_budget.hpp"

#include <algorithm>

namespace fsd {

std::optional<std::uint64_t> RefusedStepBudget::take(uid_t uid, Clock::time_point now) {
  std::lock_guard g(mu_);
  auto [it, fresh] = buckets_.try_emplace(uid);
  Bucket& b = it->second;
  if (fresh) b.at = now;
  const double refill = std::chrono::duration<double>(now - b.at).count() * kPerSecond;
  b.tokens = std::min(kBurst, b.tokens + std::max(0.0, refill));
  b.at = std::max(b.at, now);
  if (b.tokens < 1) {
    ++b.dropped;
    return std::nullopt;
  }
  b.tokens -= 1;
  const std::uint64_t dropped = b.dropped;
  b.dropped = 0;
  return dropped;
}

}  // namespace fsd
