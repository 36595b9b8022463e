// Signals: from elsewhere (the record says "killed") and through
// Supervisor::signal (reaches the command; an ended command is ESRCH).
#include <signal.h>

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::Errc;

using SignalTest = SupervisorTest;

TEST_F(SignalTest, KilledFromElsewhere) {
  auto r = sup_->start(argv({"/bin/sleep", "30"}));
  SBX_ASSERT_OK(r);
  ASSERT_GT(r->pid, 0);
  ASSERT_EQ(::kill(r->pid, SIGKILL), 0);
  auto st = wait_ended(r->bg_id, 5000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, "exited");
  EXPECT_EQ(st->exit_code, -1);
  EXPECT_EQ(st->signal, "SIGKILL");
  EXPECT_EQ(st->end_reason, "killed");
  EXPECT_FALSE(st->timed_out);
  auto j = st->to_json();
  EXPECT_EQ(j.value("signal", ""), "SIGKILL");
  EXPECT_EQ(j.value("exitCode", 0), -1);
}

TEST_F(SignalTest, TermFromElsewhere) {
  auto r = sup_->start(argv({"/bin/sleep", "30"}));
  SBX_ASSERT_OK(r);
  ASSERT_EQ(::kill(r->pid, SIGTERM), 0);
  auto st = wait_ended(r->bg_id, 5000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, -1);
  EXPECT_EQ(st->signal, "SIGTERM");
  EXPECT_EQ(st->end_reason, "killed");
}

TEST_F(SignalTest, SignalReachesTrap) {
  auto r = sup_->start(shell("trap 'echo got-term; exit 5' TERM; sleep 30 & echo armed; wait"));
  SBX_ASSERT_OK(r);
  // The trap is set and the child has exec'd (so it no longer runs the shell's handler).
  ASSERT_TRUE(wait_for_text(r->log_file, "armed")) << read_file(r->log_file);
  ASSERT_TRUE(wait_for_marked_process({"sleep", "30"}));
  SBX_ASSERT_OK(sup_->signal(r->bg_id, SIGTERM));
  auto st = wait_ended(r->bg_id, 5000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(read_stream(st->stdout_file), "armed\ngot-term\n");
  EXPECT_EQ(st->exit_code, 5);
  EXPECT_TRUE(st->signal.empty()) << st->signal;
  // A signal request is not a stop: the command ended on its own.
  EXPECT_EQ(st->end_reason, "exited");
}

TEST_F(SignalTest, SignalReachesTheWholeTree) {
  // USR1 kills a child that is not the root (default action: terminate).
  auto r = sup_->start(shell("trap 'echo usr1' USR1; sleep 30 & echo armed; wait; echo waited; exit 0"));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_for_text(r->log_file, "armed"));
  ASSERT_TRUE(wait_for_marked_process({"sleep", "30"}));
  SBX_ASSERT_OK(sup_->signal(r->bg_id, SIGUSR1));
  // The trap interrupts `wait`, the shell exits; sleep died of USR1 too,
  // otherwise the command would still be running (it waits for descendants).
  auto st = wait_ended(r->bg_id, 5000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_TRUE(marked_except_monitor(r->bg_id).empty()) << pids_to_string(marked());
}

TEST_F(SignalTest, SignalOnEndedIsNoSuchProcess) {
  auto r = sup_->start(shell("exit 0"));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_ended(r->bg_id));
  auto s = sup_->signal(r->bg_id, SIGTERM);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::no_such_process) << s.error().message;
  // And the record did not change.
  auto st = sup_->status(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_EQ(st->end_reason, "exited");
}

TEST_F(SignalTest, SignalOnUnknownIsNotFound) {
  auto s = sup_->signal("nope", SIGTERM);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::not_found);
}

TEST_F(SignalTest, BadSignalNumberIsInvalid) {
  auto r = sup_->start(argv({"/bin/sleep", "30"}));
  SBX_ASSERT_OK(r);
  for (int sig : {-1, 1000}) {
    auto s = sup_->signal(r->bg_id, sig);
    ASSERT_FALSE(s.ok()) << sig;
    EXPECT_EQ(s.error().code, Errc::invalid_argument) << sig;
  }
  EXPECT_TRUE(sup_->status(r->bg_id)->running);
  EXPECT_TRUE(process_alive(r->pid));
}

}  // namespace
