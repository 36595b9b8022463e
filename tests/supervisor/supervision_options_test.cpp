// The supervision options through the library: a restart policy run by the
// monitor (restarts counted, the record ends when the policy is over) and
// the queue past max_running (queued, started in order, stoppable, kept
// across a reopen).
#include <fstream>

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::Errc;

class SupervisionOptionsTest : public SupervisorTest {
 protected:
  bool open_in_setup() const override { return false; }
  void SetUp() override {
    SupervisorTest::SetUp();
    open_with_max_running(1);
  }
  void open_with_max_running(std::size_t n) {
    sup_.reset();
    sup::SupervisorOptions o;
    o.state_dir = state_dir();
    o.monitor_path = SBX_MONITOR_PATH;
    o.max_running = n;
    auto r = sup::Supervisor::open(std::move(o));
    ASSERT_TRUE(r.ok()) << describe(r.error());
    sup_ = std::move(r.value());
  }
  std::string go_file() const { return work_.path() + "/go"; }
  sup::StartSpec blocker() const { return shell("while [ ! -e go ]; do sleep 0.02; done"); }
  sup::StartSpec queued(const std::string& text) const {
    sup::StartSpec s = shell(text);
    s.queue = true;
    return s;
  }
  void release() { std::ofstream(go_file()).put('\n'); }
};

TEST_F(SupervisionOptionsTest, RestartPolicyEndsAfterMaxRestarts) {
  sup::StartSpec s = shell("echo run >> runs; exit 2");
  s.restart = sup::RestartPolicy::on_failure;
  s.restart_delay_sec = 0.05;
  s.max_restarts = 2;
  auto r = sup_->start(s);
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->restarts, 0u);
  EXPECT_EQ(r->restart, "on-failure");
  auto st = sup_->wait(r->bg_id, 20000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, "exited");
  EXPECT_EQ(st->restarts, 2u);
  EXPECT_EQ(st->exit_code, 2);
  EXPECT_EQ(st->end_reason, "exited");
  std::ifstream runs(work_.path() + "/runs");
  int n = 0;
  for (std::string line; std::getline(runs, line);) ++n;
  EXPECT_EQ(n, 3);
}

TEST_F(SupervisionOptionsTest, QueuedPastMaxRunningStartsWhenAPlaceIsFree) {
  auto a = sup_->start(blocker());
  SBX_ASSERT_OK(a);
  // Without queue: try_again, as before.
  auto refused = sup_->start(shell("true"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::try_again);
  auto q1 = sup_->start(queued("echo 1 >> order"));
  SBX_ASSERT_OK(q1);
  EXPECT_EQ(q1->state, "queued");
  EXPECT_FALSE(q1->running);
  EXPECT_TRUE(q1->queued);
  EXPECT_EQ(q1->pid, 0);
  auto q2 = sup_->start(queued("echo 2 >> order"));
  SBX_ASSERT_OK(q2);
  auto q3 = sup_->start(queued("echo 3 >> order"));
  SBX_ASSERT_OK(q3);
  // Stopped while queued: ended at once, never run.
  SBX_EXPECT_OK(sup_->stop(q2->bg_id));
  auto stopped = sup_->status(q2->bg_id);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(stopped->state, "exited");
  EXPECT_EQ(stopped->end_reason, "stopped");
  EXPECT_TRUE(stopped->started_at.empty());
  // A signal needs a command that started.
  auto sig = sup_->signal(q1->bg_id, SIGTERM);
  ASSERT_FALSE(sig.ok());
  EXPECT_EQ(sig.error().code, Errc::no_such_process);
  release();
  auto done = sup_->wait(q3->bg_id, 20000ms);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, "exited");
  EXPECT_EQ(done->exit_code, 0);
  std::ifstream order(work_.path() + "/order");
  std::string all((std::istreambuf_iterator<char>(order)), std::istreambuf_iterator<char>());
  EXPECT_EQ(all, "1\n3\n");
}

TEST_F(SupervisionOptionsTest, AReopenedSupervisorStartsWhatIsQueued) {
  auto a = sup_->start(blocker());
  SBX_ASSERT_OK(a);
  auto q = sup_->start(queued("echo ran >> order"));
  SBX_ASSERT_OK(q);
  sup_.reset();  // its commands live on; the queued one waits on disk
  release();
  // The blocker ends while no supervisor runs: its place is free at the reopen.
  ASSERT_TRUE(wait_until([&] { return fs::exists(record_dir(a->bg_id) + "/exit.json"); }, 10000ms));
  open_with_max_running(1);
  auto st = sup_->status(q->bg_id);
  ASSERT_TRUE(st);
  EXPECT_NE(st->state, "exited");
  auto done = sup_->wait(q->bg_id, 20000ms);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->state, "exited");
  EXPECT_EQ(done->exit_code, 0);
  EXPECT_TRUE(fs::exists(work_.path() + "/order"));
}

}  // namespace
