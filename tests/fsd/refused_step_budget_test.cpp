// A user's refused requests kept as box steps: a burst, then one a second;
// what went past is told with the next one kept; each user has their own.
#include "fsd/refused_step_budget.hpp"

#include <gtest/gtest.h>

namespace fsd {
namespace {

using namespace std::chrono_literals;

TEST(RefusedStepBudget, ABurstThenOneASecondAndTheSkippedAreCounted) {
  RefusedStepBudget b;
  const auto t0 = RefusedStepBudget::Clock::time_point{} + 1000s;
  for (int i = 0; i < static_cast<int>(RefusedStepBudget::kBurst); ++i) EXPECT_EQ(b.take(1000, t0), 0u) << i;
  EXPECT_FALSE(b.take(1000, t0).has_value());
  EXPECT_FALSE(b.take(1000, t0 + 500ms).has_value());
  // Another user is not held back by the first.
  EXPECT_EQ(b.take(1001, t0), 0u);
  // A second later: one more, telling the two not kept.
  EXPECT_EQ(b.take(1000, t0 + 1s), 2u);
  EXPECT_FALSE(b.take(1000, t0 + 1s).has_value());
  EXPECT_EQ(b.take(1000, t0 + 2s), 1u);
  // Idle long enough, the whole burst again (never more).
  const auto later = t0 + 1h;
  for (int i = 0; i < static_cast<int>(RefusedStepBudget::kBurst); ++i) EXPECT_EQ(b.take(1000, later), 0u) << i;
  EXPECT_FALSE(b.take(1000, later).has_value());
}

}  // namespace
}  // namespace fsd
