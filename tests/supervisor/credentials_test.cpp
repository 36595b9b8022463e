// run_as: the command (not its monitor) runs with the requester's credentials.
#include "test_util.hpp"

namespace sbxtest {
namespace {

using CredentialsTest = SupervisorTest;

TEST_F(CredentialsTest, CommandRunsAsTheGivenUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to change user";
  auto spec = shell("id -u; id -g; id -G");
  spec.run_as = sup::Credentials{65534, 65534, {65534}};
  auto st = sup_->start(spec);
  SBX_ASSERT_OK(st);
  auto end = wait_ended(st->bg_id);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->exit_code, 0);
  EXPECT_EQ(read_file(end->log_file), "65534\n65534\n65534\n");
  // The monitor stays root: it must be able to signal and reap anything.
  auto mon = read_json(record_dir(st->bg_id) + "/monitor.json");
  ASSERT_TRUE(mon);
}

TEST_F(CredentialsTest, StopReachesADroppedTree) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to change user";
  auto spec = shell("trap 'exit 9' TERM; sleep 30 & wait");
  spec.run_as = sup::Credentials{65534, 65534, {}};
  auto st = sup_->start(spec);
  SBX_ASSERT_OK(st);
  auto end = sup_->stop_and_wait(st->bg_id, 10000ms);
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->running);
  EXPECT_EQ(end->end_reason, "stopped");
  EXPECT_TRUE(marked_except_monitor(st->bg_id).empty()) << pids_to_string(marked());
}

}  // namespace
}  // namespace sbxtest
