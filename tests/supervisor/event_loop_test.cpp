// The event loop's own callbacks change timers and post tasks without
// waking it: the end of the round takes them in before the loop sleeps
// again. (Timers and posts from other threads: events_test.cpp.)
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <vector>

#include "supervisor/event_loop.hpp"

namespace {

using namespace std::chrono_literals;
using sup::EventLoop;

/// When the promise was kept, or nullopt after `limit`.
std::optional<EventLoop::Clock::time_point> kept_at(std::future<EventLoop::Clock::time_point>& f,
                                                     std::chrono::milliseconds limit = 5000ms) {
  if (f.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return f.get();
}

TEST(EventLoopTest, ATaskPostedFromOutsideRunsOnTheLoop) {
  EventLoop loop;
  std::promise<bool> on_loop;
  auto f = on_loop.get_future();
  loop.post([&] { on_loop.set_value(loop.on_loop_thread()); });
  ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(f.get());
}

TEST(EventLoopTest, ATaskPostedByATaskRunsWithoutAnotherWakeUp) {
  EventLoop loop;
  std::promise<EventLoop::Clock::time_point> second;
  auto f = second.get_future();
  loop.post([&] { loop.post([&] { second.set_value(EventLoop::Clock::now()); }); });
  EXPECT_TRUE(kept_at(f).has_value()) << "the loop slept with a task posted";
}

TEST(EventLoopTest, ATimerAddedByATaskFiresAtItsTime) {
  EventLoop loop;
  std::promise<EventLoop::Clock::time_point> fired;
  auto f = fired.get_future();
  const auto when = EventLoop::Clock::now() + 50ms;
  loop.post([&] { loop.add_timer(when, [&] { fired.set_value(EventLoop::Clock::now()); }); });
  const auto at = kept_at(f);
  ASSERT_TRUE(at.has_value()) << "armed at the end of the task's round";
  EXPECT_GE(*at, when);
}

TEST(EventLoopTest, AnEarlierTimerAddedByATaskGoesFirst) {
  EventLoop loop;
  std::promise<EventLoop::Clock::time_point> early;
  auto f = early.get_future();
  loop.add_timer(EventLoop::Clock::now() + 10s, [] {});
  const auto when = EventLoop::Clock::now() + 30ms;
  loop.post([&] { loop.add_timer(when, [&] { early.set_value(EventLoop::Clock::now()); }); });
  const auto at = kept_at(f, 3000ms);
  ASSERT_TRUE(at.has_value()) << "the timer fd stayed at the later time";
  EXPECT_GE(*at, when);
}

TEST(EventLoopTest, CancellingTheFirstTimerLetsTheNextFireOnTime) {
  for (const bool from_loop : {false, true}) {
    SCOPED_TRACE(from_loop ? "cancelled by a task" : "cancelled from outside");
    EventLoop loop;
    std::atomic<bool> first_fired{false};
    std::promise<EventLoop::Clock::time_point> second;
    auto f = second.get_future();
    const auto now = EventLoop::Clock::now();
    const std::uint64_t first = loop.add_timer(now + 100ms, [&] { first_fired = true; });
    loop.add_timer(now + 200ms, [&] { second.set_value(EventLoop::Clock::now()); });
    if (from_loop) {
      std::promise<bool> cancelled;
      auto c = cancelled.get_future();
      loop.post([&] { cancelled.set_value(loop.cancel_timer(first)); });
      ASSERT_EQ(c.wait_for(5s), std::future_status::ready);
      EXPECT_TRUE(c.get());
    } else {
      EXPECT_TRUE(loop.cancel_timer(first));
    }
    const auto at = kept_at(f);
    ASSERT_TRUE(at.has_value());
    EXPECT_GE(*at, now + 200ms);
    EXPECT_FALSE(first_fired);
    EXPECT_FALSE(loop.cancel_timer(first)) << "gone already";
  }
}

TEST(EventLoopTest, ManyTimersAddedAndCancelledInOneRoundLeaveTheRightOneArmed) {
  EventLoop loop;
  std::atomic<int> fired{0};
  std::promise<EventLoop::Clock::time_point> last;
  auto f = last.get_future();
  const auto now = EventLoop::Clock::now();
  loop.post([&] {
    // As a round that answers many parked readers does: each cancels its cap.
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 100; ++i) ids.push_back(loop.add_timer(now + 20ms + i * 1ms, [&] { ++fired; }));
    for (std::uint64_t id : ids) loop.cancel_timer(id);
    loop.add_timer(now + 80ms, [&] { last.set_value(EventLoop::Clock::now()); });
  });
  const auto at = kept_at(f);
  ASSERT_TRUE(at.has_value());
  EXPECT_GE(*at, now + 80ms);
  EXPECT_EQ(fired.load(), 0);
}

}  // namespace
