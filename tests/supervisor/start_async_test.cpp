// Supervisor::start_async: the outcome comes later, on the event thread, and
// a start whose monitor does not report is given up (stop, timeout,
// cancel_starts) with nothing left. The monitor server is SIGSTOPped so
// that no monitor reports.
#include <signal.h>

#include <functional>
#include <future>
#include <sstream>
#include <thread>

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::Errc;

class StartAsyncTest : public SupervisorTest {
 protected:
  bool open_in_setup() const override { return false; }

  void SetUp() override {
    SupervisorTest::SetUp();
    sup::SupervisorOptions o;
    o.state_dir = state_dir();
    o.monitor_path = SBX_MONITOR_PATH;
    o.start_timeout = 500ms;
    auto r = sup::Supervisor::open(std::move(o));
    ASSERT_TRUE(r.ok()) << describe(r.error());
    sup_ = std::move(r.value());
  }
  void TearDown() override {
    if (server_ > 0) ::kill(server_, SIGCONT);
    SupervisorTest::TearDown();
  }

  /// Stops this process's monitor server (`sbxfs-monitor --serve`), once
  /// its exec is over (a sanitizer build may exec itself again at start).
  void stop_server() {
    ASSERT_TRUE(wait_until([&] {
      for (const std::string& task : dir_entries("/proc/self/task")) {
        std::istringstream in(read_file("/proc/self/task/" + task + "/children"));
        for (pid_t pid; in >> pid;)
          if (proc_cmdline(pid).find("--serve") != std::string::npos) server_ = pid;
      }
      return server_ > 0;
    }, 5000ms)) << "no monitor server among this process's children";
    ASSERT_EQ(::kill(server_, SIGSTOP), 0);
  }

  /// Starts waiting for their monitor (their staging folders).
  int under_way() const {
    int n = 0;
    for (const std::string& e : dir_entries(state_dir() + "/staging"))
      if (e.rfind("new-", 0) == 0) ++n;
    return n;
  }

  struct Outcome {
    std::promise<sup::Result<sup::CommandStatus>> result;
    std::promise<std::thread::id> thread;
  };
  sup::Supervisor::StartDone told(std::shared_ptr<Outcome> o) {
    return [o](sup::Result<sup::CommandStatus> r) {
      o->thread.set_value(std::this_thread::get_id());
      o->result.set_value(std::move(r));
    };
  }

  /// Starts `spec`, calling `at_published(id)` from its `published`
  /// callback (listed, not yet let go to exec): the outcome (waited for up
  /// to 5 s), and what the call returned (false if it was not made).
  std::pair<sup::Result<sup::CommandStatus>, bool> start_calling(const sup::StartSpec& spec,
                                                                 std::function<bool(const std::string&)> at_published) {
    auto o = std::make_shared<Outcome>();
    auto result = o->result.get_future();
    auto called = std::make_shared<std::promise<bool>>();
    auto said = called->get_future();
    sup_->start_async(spec, sup::StartMode::new_only, told(o), {},
                      [called, at_published](const sup::CommandStatus& st) { called->set_value(at_published(st.bg_id)); });
    if (result.wait_for(5000ms) != std::future_status::ready)
      return {sup::Error{sup::Errc::timed_out, "no outcome within 5 s"}, false};
    return {result.get(), said.wait_for(0ms) == std::future_status::ready && said.get()};
  }

  pid_t server_ = 0;
};

TEST_F(StartAsyncTest, AValidationErrorIsToldAtOnceOnTheCallersThread) {
  auto o = std::make_shared<Outcome>();
  auto result = o->result.get_future();
  auto thread = o->thread.get_future();
  sup::StartSpec bad = shell("true");
  bad.cwd = "relative";
  sup_->start_async(bad, sup::StartMode::new_only, told(o));
  ASSERT_EQ(result.wait_for(0ms), std::future_status::ready);
  EXPECT_EQ(thread.get(), std::this_thread::get_id());
  auto r = result.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
}

TEST_F(StartAsyncTest, TheOutcomeComesLaterOnTheEventThreadWhenTheMonitorReports) {
  stop_server();
  auto o = std::make_shared<Outcome>();
  auto result = o->result.get_future();
  auto thread = o->thread.get_future();
  sup_->start_async(shell("echo hi", "late"), sup::StartMode::new_only, told(o));
  // The call returned without an outcome: the monitor is stopped.
  ASSERT_TRUE(wait_until([&] { return under_way() == 1; }, 5000ms));
  EXPECT_EQ(result.wait_for(100ms), std::future_status::timeout);
  EXPECT_FALSE(sup_->status("late"));
  ASSERT_EQ(::kill(server_, SIGCONT), 0);
  ASSERT_EQ(result.wait_for(5000ms), std::future_status::ready);
  EXPECT_NE(thread.get(), std::this_thread::get_id());
  auto r = result.get();
  ASSERT_TRUE(r.ok()) << describe(r.error());
  EXPECT_EQ(r->bg_id, "late");
  auto ended = sup_->wait("late", 5000ms);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->exit_code, 0);
}

// A STOP (a pause) written once the record is listed and before the
// command has exec'd: frozen then, it could not exec, and the start would
// time out with its command let go. It is paused once it has exec'd.
TEST_F(StartAsyncTest, AStopWrittenWhileItStartsPausesItOnceItHasExeced) {
  // It waits for `go`: tracked without a cgroup, the STOP reaches it after
  // its exec (through its monitor), and it must still be there then.
  const std::string go = state_dir() + "/go";
  auto [r, paused] = start_calling(shell("while [ ! -e '" + go + "' ]; do sleep 0.01; done; exit 3", "early-stop"),
                                   [this](const std::string& id) { return sup_->signal(id, SIGSTOP).ok(); });
  ASSERT_TRUE(r.ok()) << describe(r.error()) << " (start_timeout is 500 ms)";
  EXPECT_TRUE(paused);
  auto st = sup_->status("early-stop");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, "paused");
  if (!st->cgroup.empty()) {
    EXPECT_EQ(read_file(st->cgroup + "/cgroup.freeze"), "1\n");
  }
  write_file(go, "");
  const sup::Status cont = sup_->signal("early-stop", SIGCONT);
  ASSERT_TRUE(cont.ok()) << describe(cont.error());
  auto ended = sup_->wait("early-stop", 5000ms);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->exit_code, 3);
}

// The same STOP, then a stop, both before the exec: the stop's TERM must
// not find the tree frozen at the start's end (it would wait for the grace).
TEST_F(StartAsyncTest, AStopAfterAnEarlyStopIsNotFrozenAtTheStartsEnd) {
  sup::StartSpec spec = shell("sleep 30", "stopped-early");
  spec.stop_grace_sec = 20;
  auto [r, asked] = start_calling(spec, [this](const std::string& id) {
    return sup_->signal(id, SIGSTOP).ok() && sup_->stop(id).ok();
  });
  ASSERT_TRUE(r.ok()) << describe(r.error());
  EXPECT_TRUE(asked);
  auto ended = sup_->wait("stopped-early", 10000ms);
  ASSERT_TRUE(ended);
  EXPECT_FALSE(ended->running);
  EXPECT_EQ(ended->signal, "SIGTERM") << "ended by its TERM, not by the grace's KILL";
}

TEST_F(StartAsyncTest, AStopBeforeTheOutcomeIsInterruptedAndNothingRuns) {
  stop_server();
  auto o = std::make_shared<Outcome>();
  auto result = o->result.get_future();
  std::stop_source stop;
  const std::string flag = work_.path() + "/ran";
  sup_->start_async(shell("touch '" + flag + "'", "called-off"), sup::StartMode::new_only, told(o), stop.get_token());
  ASSERT_TRUE(wait_until([&] { return under_way() == 1; }, 5000ms));
  stop.request_stop();
  ASSERT_EQ(result.wait_for(5000ms), std::future_status::ready);
  auto r = result.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::interrupted);
  EXPECT_FALSE(sup_->status("called-off"));
  EXPECT_TRUE(wait_until([&] { return under_way() == 0; }, 5000ms));
  // The name is free again, and the monitor of the called-off start, forked
  // late, finds no folder: only the second start runs.
  ASSERT_EQ(::kill(server_, SIGCONT), 0);
  auto again = sup_->start(shell("true", "called-off"));
  ASSERT_TRUE(again.ok()) << describe(again.error());
  ASSERT_TRUE(sup_->wait("called-off", 5000ms));
  EXPECT_FALSE(file_exists(flag));
}

TEST_F(StartAsyncTest, AMonitorThatNeverReportsTimesOut) {
  stop_server();
  const auto t0 = Clock::now();
  auto r = sup_->start(shell("true", "stuck"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::timed_out) << r.error().message;
  EXPECT_GE(seconds_since(t0), 0.45);
  EXPECT_FALSE(sup_->status("stuck"));
  EXPECT_TRUE(wait_until([&] { return under_way() == 0; }, 5000ms));
  EXPECT_TRUE(sup_->list().empty());
}

TEST_F(StartAsyncTest, CancelStartsFailsThoseUnderWayAndLaterOnesAtOnce) {
  stop_server();
  auto o = std::make_shared<Outcome>();
  auto result = o->result.get_future();
  sup_->start_async(shell("true"), sup::StartMode::new_only, told(o));
  ASSERT_TRUE(wait_until([&] { return under_way() == 1; }, 5000ms));
  sup_->cancel_starts();
  ASSERT_EQ(result.wait_for(0ms), std::future_status::ready);  // told before cancel_starts returned
  auto r = result.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::io_error);
  auto later = sup_->start(shell("true"));
  ASSERT_FALSE(later.ok());
  EXPECT_EQ(later.error().code, Errc::io_error);
  EXPECT_TRUE(sup_->list().empty());
}

}  // namespace
