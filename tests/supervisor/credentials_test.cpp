// run_as: the command (not its monitor) runs with the requester's credentials.
#include <sys/fsuid.h>
#include <unistd.h>

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

TEST_F(CredentialsTest, AWorkingDirectoryTheUserCannotSearchIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to change user";
  // The test's folder is 0700 and root's: the monitor could change there,
  // the user the command runs as could not.
  auto spec = shell("pwd");
  spec.cwd_is_writers = false;  // named by the request
  spec.run_as = sup::Credentials{65534, 65534, {}};
  auto st = sup_->start(spec);
  ASSERT_FALSE(st.ok()) << "started in a folder its user cannot enter";
  EXPECT_EQ(st.error().code, sup::Errc::permission_denied);
  EXPECT_NE(st.error().message.find("cannot be searched by uid 65534"), std::string::npos) << st.error().message;
  EXPECT_TRUE(sup_->list_running().empty());
  // Its groups count: the same folder open to group 4242 lets a member in.
  ASSERT_EQ(::chown(spec.cwd.c_str(), 0, 4242), 0);
  ASSERT_EQ(::chmod(spec.cwd.c_str(), 0710), 0);
  spec.run_as = sup::Credentials{65534, 65534, {4242}};
  st = sup_->start(spec);
  SBX_ASSERT_OK(st);
  auto end = wait_ended(st->bg_id);
  ASSERT_TRUE(end);
  EXPECT_EQ(read_file(end->log_file), spec.cwd + "\n");
  // Where the writer is (a process can stay in a folder it could not enter
  // now): allowed, as for any child of the writer.
  ASSERT_EQ(::chmod(spec.cwd.c_str(), 0700), 0);
  spec.cwd_is_writers = true;
  spec.run_as = sup::Credentials{65534, 65534, {}};
  st = sup_->start(spec);
  SBX_ASSERT_OK(st);
  ASSERT_TRUE(wait_ended(st->bg_id));
  // And this thread's own file-system ids are back (the check may have run here).
  EXPECT_EQ(::setfsuid(static_cast<uid_t>(-1)), 0);
  EXPECT_EQ(::setfsgid(static_cast<gid_t>(-1)), 0);
}

}  // namespace
}  // namespace sbxtest
