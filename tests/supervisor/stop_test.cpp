// Stopping and ending: the whole tree goes (setsid-escaped children too),
// TERM-ignoring trees are killed after the grace, timeouts, and a command
// stays running while any descendant lives.
#include <signal.h>

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::Errc;

using StopTest = SupervisorTest;

const std::string kSleep100 = std::string("sleep\0" "100\0", 10);

TEST_F(StopTest, StopsSetsidEscapedGrandchild) {
  auto r = sup_->start(shell("setsid sleep 100 & sleep 100"));
  SBX_ASSERT_OK(r);
  // Precondition: two sleeps, one of them in a session of its own.
  std::vector<pid_t> sleeps;
  ASSERT_TRUE(wait_until(
      [&] {
        sleeps.clear();
        for (pid_t p : marked())
          if (proc_cmdline(p) == kSleep100) sleeps.push_back(p);
        return sleeps.size() == 2;
      },
      5000ms))
      << pids_to_string(marked());
  std::set<std::string> sessions;
  for (pid_t p : sleeps) {
    auto f = proc_stat_fields(p);
    ASSERT_GE(f.size(), 4u);
    sessions.insert(f[3]);
  }
  ASSERT_EQ(sessions.size(), 2u) << "setsid did not make a new session";

  const auto t0 = Clock::now();
  auto st = sup_->stop_and_wait(r->bg_id, 10000ms);
  const double took = seconds_since(t0);
  ASSERT_TRUE(st);
  ASSERT_FALSE(st->running) << "still running after 10 s";
  EXPECT_EQ(st->state, "exited");
  EXPECT_EQ(st->end_reason, "stopped");
  EXPECT_EQ(st->exit_code, -1);
  EXPECT_EQ(st->signal, "SIGTERM");
  EXPECT_FALSE(st->timed_out);
  // SIGTERM reached the escaped sleep: no need to wait for the 5 s grace.
  EXPECT_LT(took, 4.0);
  // Nothing of the tree is left at the moment it is reported ended.
  EXPECT_TRUE(marked_except_monitor(r->bg_id).empty()) << pids_to_string(marked());
  for (pid_t p : sleeps) EXPECT_FALSE(process_alive(p)) << p;
  // ... and the monitor goes too.
  EXPECT_TRUE(wait_until([&] { return marked().empty(); }, 5000ms)) << pids_to_string(marked());
}

TEST_F(StopTest, TermIgnoringTreeIsKilledAfterGrace) {
  auto spec = shell("trap '' TERM; sleep 100 & echo armed; wait");
  spec.stop_grace_sec = 0.5;
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_for_text(r->log_file, "armed"));
  ASSERT_TRUE(wait_for_marked_process({"sleep", "100"}));

  const auto t0 = Clock::now();
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  const double stop_call = seconds_since(t0);
  EXPECT_LT(stop_call, 0.3) << "stop() should return at once";
  if (stop_call < 0.3) {
    auto mid = sup_->status(r->bg_id);
    ASSERT_TRUE(mid);
    EXPECT_TRUE(mid->running) << "ended before the grace ran out, though TERM is ignored";
  }
  auto st = sup_->wait(r->bg_id, 10000ms);
  const double took = seconds_since(t0);
  ASSERT_TRUE(st);
  ASSERT_FALSE(st->running) << "still running 10 s after stop";
  EXPECT_GE(took, 0.4);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(st->end_reason, "stopped");
  EXPECT_EQ(st->exit_code, -1);
  EXPECT_EQ(st->signal, "SIGKILL");
  EXPECT_TRUE(marked_except_monitor(r->bg_id).empty()) << pids_to_string(marked());
  EXPECT_TRUE(wait_until([&] { return marked().empty(); }, 5000ms)) << pids_to_string(marked());
}

TEST_F(StopTest, ZeroGraceKillsAtOnce) {
  auto spec = shell("trap '' TERM; sleep 100 & echo armed; wait");
  spec.stop_grace_sec = 0;
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_for_text(r->log_file, "armed"));
  ASSERT_TRUE(wait_for_marked_process({"sleep", "100"}));
  const auto t0 = Clock::now();
  auto st = sup_->stop_and_wait(r->bg_id, 10000ms);
  ASSERT_TRUE(st);
  ASSERT_FALSE(st->running);
  EXPECT_LT(seconds_since(t0), 2.0);
  EXPECT_EQ(st->end_reason, "stopped");
  EXPECT_EQ(st->signal, "SIGKILL");
}

TEST_F(StopTest, StopEndedChangesNothing) {
  auto r = sup_->start(shell("exit 4"));
  SBX_ASSERT_OK(r);
  auto before = wait_ended(r->bg_id);
  ASSERT_TRUE(before);
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  auto after = sup_->stop_and_wait(r->bg_id, 1000ms);
  ASSERT_TRUE(after);
  EXPECT_EQ(after->to_json(), before->to_json());
  EXPECT_EQ(after->exit_code, 4);
  EXPECT_EQ(after->end_reason, "exited");
}

TEST_F(StopTest, StopUnknownIsNotFound) {
  auto s = sup_->stop("nope");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::not_found);
  EXPECT_FALSE(sup_->stop_and_wait("nope", 100ms).has_value());
  EXPECT_FALSE(sup_->wait("nope", 100ms).has_value());
}

TEST_F(StopTest, StopEmptySlotIsNoop) {
  SBX_ASSERT_OK(sup_->create_slot("slot", ::getuid(), ::getsid(0)));
  SBX_EXPECT_OK(sup_->stop("slot"));
  auto st = sup_->status("slot");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, "empty");
}

TEST_F(StopTest, Timeout) {
  auto spec = argv({"/bin/sleep", "30"});
  spec.timeout_sec = 0.3;
  const auto t0 = Clock::now();
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 5000ms);
  const double took = seconds_since(t0);
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->timed_out);
  EXPECT_EQ(st->end_reason, "timedOut");
  EXPECT_EQ(st->exit_code, -1);
  EXPECT_EQ(st->signal, "SIGTERM");
  EXPECT_GE(took, 0.25);
  EXPECT_LT(took, 4.0);
  EXPECT_EQ(st->to_json().value("timedOut", false), true);
  EXPECT_TRUE(marked_except_monitor(r->bg_id).empty()) << pids_to_string(marked());
}

TEST_F(StopTest, NoTimeoutWhenItEndsFirst) {
  auto spec = shell("exit 2");
  spec.timeout_sec = 5;
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 5000ms);
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->timed_out);
  EXPECT_EQ(st->exit_code, 2);
  EXPECT_EQ(st->end_reason, "exited");
}

TEST_F(StopTest, ChildOutlivingRootKeepsCommandRunning) {
  // The child lives until the test lets it go (a file appears in the
  // command's cwd), so a loaded machine cannot close the window early.
  const std::string go = work_.path() + "/go";
  auto r = sup_->start(shell("(while [ ! -e go ]; do sleep 0.02; done) & exit 0"));
  SBX_ASSERT_OK(r);
  const pid_t root = r->pid;
  ASSERT_TRUE(wait_until([&] { return !process_alive(root); }, 5000ms)) << "root did not exit";
  auto mid = sup_->status(r->bg_id);
  ASSERT_TRUE(mid);
  EXPECT_TRUE(mid->running) << "ended while its child lives";
  EXPECT_EQ(mid->state, "running");
  EXPECT_FALSE(marked_except_monitor(r->bg_id).empty());
  auto later = sup_->wait(r->bg_id, 200ms);
  ASSERT_TRUE(later);
  EXPECT_TRUE(later->running) << "ended while its child lives";

  { std::ofstream(go).put('\n'); }
  auto st = wait_ended(r->bg_id, 5000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);  // the root's
  EXPECT_EQ(st->end_reason, "exited");
  EXPECT_TRUE(marked_except_monitor(r->bg_id).empty()) << pids_to_string(marked());
}

TEST_F(StopTest, StopReachesChildOutlivingRoot) {
  auto r = sup_->start(shell("sleep 100 & exit 0"));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_until([&] { return !process_alive(r->pid); }, 5000ms));
  auto st = sup_->stop_and_wait(r->bg_id, 10000ms);
  ASSERT_TRUE(st);
  ASSERT_FALSE(st->running);
  EXPECT_EQ(st->end_reason, "stopped");
  EXPECT_EQ(st->exit_code, 0);  // the root had exited on its own
  EXPECT_TRUE(marked_except_monitor(r->bg_id).empty()) << pids_to_string(marked());
}

}  // namespace
