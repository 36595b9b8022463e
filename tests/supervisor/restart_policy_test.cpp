// The restart policy's rules (which ends start another run) and its delays.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "supervisor/restart_policy.hpp"

namespace {

using namespace std::chrono_literals;
using sup::RestartPolicy;
using sup::RunEnd;

TEST(RestartPolicy, Names) {
  for (RestartPolicy p : {RestartPolicy::no, RestartPolicy::on_failure, RestartPolicy::always})
    EXPECT_EQ(sup::parse_restart_policy(sup::restart_policy_name(p)), p);
  EXPECT_STREQ(sup::restart_policy_name(RestartPolicy::on_failure), "on-failure");
  EXPECT_FALSE(sup::parse_restart_policy("on_failure").has_value());
  EXPECT_FALSE(sup::parse_restart_policy("").has_value());
}

TEST(RestartPolicy, WhichEndsRestart) {
  const RunEnd ok{0, false, false}, failed{3, false, false}, signalled{-1, true, false};
  const RunEnd stopped{-1, true, true}, stopped_ok{0, false, true};
  struct Row {
    RestartPolicy p;
    RunEnd end;
    bool restarts;
  };
  const Row rows[] = {
      {RestartPolicy::no, ok, false},          {RestartPolicy::no, failed, false},
      {RestartPolicy::no, signalled, false},   {RestartPolicy::no, stopped, false},
      {RestartPolicy::on_failure, ok, false},  {RestartPolicy::on_failure, failed, true},
      {RestartPolicy::on_failure, signalled, true}, {RestartPolicy::on_failure, stopped, false},
      {RestartPolicy::on_failure, stopped_ok, false},
      {RestartPolicy::always, ok, true},       {RestartPolicy::always, failed, true},
      {RestartPolicy::always, signalled, true}, {RestartPolicy::always, stopped, false},
      {RestartPolicy::always, stopped_ok, false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(sup::restart_wanted(r.p, r.end, 0, std::nullopt), r.restarts)
        << sup::restart_policy_name(r.p) << " code " << r.end.exit_code << " signalled " << r.end.signalled
        << " stopped " << r.end.stopped;
  }
}

TEST(RestartPolicy, MaxRestartsCountsRestartsSoFar) {
  const RunEnd failed{1, false, false};
  EXPECT_TRUE(sup::restart_wanted(RestartPolicy::always, failed, 1, 2));
  EXPECT_FALSE(sup::restart_wanted(RestartPolicy::always, failed, 2, 2));
  EXPECT_FALSE(sup::restart_wanted(RestartPolicy::on_failure, failed, 0, 0)) << "maxRestarts 0: never";
  EXPECT_TRUE(sup::restart_wanted(RestartPolicy::on_failure, failed, 1000000, std::nullopt));
}

TEST(RestartBackoff, DoublesAfterShortRunsUpToSixty) {
  sup::RestartBackoff b(1000ms);
  std::vector<long> got;
  for (int i = 0; i < 9; ++i) got.push_back(static_cast<long>(b.after_run(100ms).count()));
  EXPECT_EQ(got, (std::vector<long>{1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000}));
}

TEST(RestartBackoff, ARunThatLastedStartsAgain) {
  sup::RestartBackoff b(500ms);
  EXPECT_EQ(b.after_run(1s).count(), 500);
  EXPECT_EQ(b.after_run(1s).count(), 1000);
  EXPECT_EQ(b.after_run(1s).count(), 2000);
  EXPECT_EQ(b.after_run(10s).count(), 500) << "a run of 10 s or more resets the delay";
  // Short runs after it count from the first delay again.
  EXPECT_EQ(b.after_run(9999ms).count(), 500);
  EXPECT_EQ(b.after_run(1s).count(), 1000);
}

TEST(RestartBackoff, AFirstDelayAboveSixtyStays) {
  sup::RestartBackoff b(90s);
  EXPECT_EQ(b.after_run(1s), 90000ms);
  EXPECT_EQ(b.after_run(1s), 90000ms);
}

}  // namespace
