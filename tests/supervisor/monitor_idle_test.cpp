// Idle monitors cost nothing: while its command is silent, a monitor is
// blocked in poll() with no timer armed (issue 6: 0 CPU, 0 wake-ups).
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

using MonitorIdleTest = SupervisorTest;

// An idle monitor sleeps in poll() with nothing armed: no wake-ups at all.
TEST_F(MonitorIdleTest, SilentCommandCostsNoWakeUps) {
  auto r = sup_->start(argv({"sleep", "30"}));
  SBX_ASSERT_OK(r);
  auto mon = read_json(record_dir(r->bg_id) + "/monitor.json");
  ASSERT_TRUE(mon);
  const pid_t monitor = mon->at("monitorPid").get<pid_t>();
  auto switches = [&] {
    std::ifstream in("/proc/" + std::to_string(monitor) + "/status");
    long long n = 0;
    for (std::string line; std::getline(in, line);)
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0 || line.rfind("nonvoluntary_ctxt_switches:", 0) == 0)
        n += std::stoll(line.substr(line.find(':') + 1));
    return n;
  };
  // Settled: in poll(), the count no longer moving.
  long long before = -1;
  ASSERT_TRUE(wait_until([&] {
    const long long now = switches();
    const bool same = now == before;
    before = now;
    return same;
  }, 5000ms, 50ms));
  std::this_thread::sleep_for(500ms);  // the window measured, not a synchronisation
  EXPECT_EQ(switches(), before) << "the monitor of a silent command woke up";
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  EXPECT_TRUE(wait_ended(r->bg_id, 10000ms));
}

}  // namespace
