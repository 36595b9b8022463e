// Events and timers on the event thread, and an idle supervisor that costs
// no CPU.
#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "supervisor/start_folder.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using Kind = sup::Event::Kind;

// Collects what a listener saw. Shared with the listener by shared_ptr, so a
// late event after a failed assertion never touches a dead stack frame.
struct Recorder {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<sup::Event> events;
  std::map<std::string, sup::CommandStatus> status_in_listener;  // at `ended`
  std::set<std::thread::id> threads;
  std::set<std::string> followed;  // whose output this subscriber follows

  void follow(const std::string& id, bool on = true) {
    std::lock_guard g(mu);
    if (on) followed.insert(id);
    else followed.erase(id);
  }

  size_t count(Kind k, const std::string& id) {
    std::lock_guard g(mu);
    return static_cast<size_t>(std::count_if(events.begin(), events.end(),
                                             [&](const sup::Event& e) { return e.kind == k && e.bg_id == id; }));
  }
  // Index of the first event k for id, or -1.
  long first(Kind k, const std::string& id) {
    std::lock_guard g(mu);
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i].kind == k && events[i].bg_id == id) return static_cast<long>(i);
    return -1;
  }
  bool wait_count(Kind k, const std::string& id, size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock g(mu);
    return cv.wait_for(g, timeout, [&] {
      return static_cast<size_t>(std::count_if(events.begin(), events.end(), [&](const sup::Event& e) {
               return e.kind == k && e.bg_id == id;
             })) >= n;
    });
  }
};

// Unsubscribes when the test body leaves, even through a failed ASSERT.
class Subscription {
 public:
  Subscription(sup::Supervisor* s, std::shared_ptr<Recorder> rec, bool query_status = true) : s_(s) {
    token_ = s->subscribe([rec, s, query_status](const sup::Event& e) {
      std::optional<sup::CommandStatus> st;
      // Listeners may call back into the Supervisor (not under its lock).
      if (query_status && e.kind == Kind::ended) st = s->status(e.bg_id);
      std::lock_guard g(rec->mu);
      rec->events.push_back(e);
      if (st) rec->status_in_listener[e.bg_id] = *st;
      rec->threads.insert(std::this_thread::get_id());
      rec->cv.notify_all();
    }, [rec](const std::string& id) {
      std::lock_guard g(rec->mu);
      return rec->followed.count(id) > 0;
    });
  }
  ~Subscription() {
    if (token_ != 0) s_->unsubscribe(token_);
  }
  void cancel() {
    s_->unsubscribe(token_);
    token_ = 0;
  }

 private:
  sup::Supervisor* s_;
  std::uint64_t token_ = 0;
};

using EventsTest = SupervisorTest;

TEST_F(EventsTest, StartedAndEnded) {
  auto rec = std::make_shared<Recorder>();
  Subscription sub(sup_.get(), rec);
  auto r = sup_->start(shell("exit 6"));
  SBX_ASSERT_OK(r);
  const std::string id = r->bg_id;
  ASSERT_TRUE(rec->wait_count(Kind::ended, id, 1, 5000ms));
  ASSERT_TRUE(rec->wait_count(Kind::started, id, 1, 1000ms));
  EXPECT_LT(rec->first(Kind::started, id), rec->first(Kind::ended, id));
  {
    std::lock_guard g(rec->mu);
    ASSERT_TRUE(rec->status_in_listener.count(id));
    const auto& st = rec->status_in_listener[id];
    EXPECT_FALSE(st.running) << "status() inside the ended listener still says running";
    EXPECT_EQ(st.exit_code, 6);
    EXPECT_FALSE(rec->threads.count(std::this_thread::get_id())) << "listener ran on the caller's thread";
  }
  // Exactly one `ended`.
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(rec->count(Kind::ended, id), 1u);
}

TEST_F(EventsTest, OutputWhenTheLogGrows) {
  auto rec = std::make_shared<Recorder>();
  Subscription sub(sup_.get(), rec);
  const std::string flag1 = work_ / "go1", flag2 = work_ / "go2";
  // Writes only when told to, so each write happens after start() returned.
  auto talker = sup_->start(shell("until [ -e '" + flag1 + "' ]; do sleep 0.02; done; echo one; " +
                                  "until [ -e '" + flag2 + "' ]; do sleep 0.02; done; echo two; sleep 30"));
  SBX_ASSERT_OK(talker);
  auto silent = sup_->start(argv({"/bin/sleep", "30"}));
  SBX_ASSERT_OK(silent);
  const std::string id = talker->bg_id;
  rec->follow(id);
  sup_->want_output(id);

  write_file(flag1, "");
  ASSERT_TRUE(rec->wait_count(Kind::output, id, 1, 5000ms)) << "no output event for \"one\"";
  EXPECT_EQ(read_file(talker->log_file).substr(0, 4), "one\n");
  std::this_thread::sleep_for(100ms);  // let the first batch of events settle
  const size_t before = rec->count(Kind::output, id);
  EXPECT_EQ(read_file(talker->log_file), "one\n");
  write_file(flag2, "");
  ASSERT_TRUE(rec->wait_count(Kind::output, id, before + 1, 5000ms)) << "no output event for \"two\"";
  EXPECT_TRUE(wait_for_text(talker->log_file, "one\ntwo\n", 1000ms));
  // A silent command produces no output events; nothing ended yet.
  EXPECT_EQ(rec->count(Kind::output, silent->bg_id), 0u);
  EXPECT_EQ(rec->count(Kind::ended, id), 0u);

  SBX_ASSERT_OK(sup_->stop(id));
  SBX_ASSERT_OK(sup_->stop(silent->bg_id));
  EXPECT_TRUE(rec->wait_count(Kind::ended, id, 1, 10000ms));
  EXPECT_TRUE(rec->wait_count(Kind::ended, silent->bg_id, 1, 10000ms));
}

// Output written at once, possibly before start() has returned, must not be
// lost: a subscriber that waits for output would otherwise wait forever.
TEST_F(EventsTest, EarlyOutputIsAnnounced) {
  auto rec = std::make_shared<Recorder>();
  Subscription sub(sup_.get(), rec);
  auto r = sup_->start(shell("echo early; sleep 30"));
  SBX_ASSERT_OK(r);
  // A follower: known, then wants output, then looks once.
  rec->follow(r->bg_id);
  sup_->want_output(r->bg_id);
  const bool seen = read_file(r->log_file) == "early\n";
  EXPECT_TRUE(seen || rec->wait_count(Kind::output, r->bg_id, 1, 2000ms))
      << "no output event; log holds \"" << read_file(r->log_file) << "\"";
}

// Writes nobody follows wake no thread: a command that prints costs the
// event thread nothing until someone follows its output, and again once
// they stop (after the first write that nobody followed).
TEST_F(EventsTest, WritesNobodyFollowsGiveNoEvents) {
  auto rec = std::make_shared<Recorder>();
  Subscription sub(sup_.get(), rec);
  auto r = sup_->start(shell("i=0; while :; do i=$((i+1)); echo $i; sleep 0.005; done"));
  SBX_ASSERT_OK(r);
  const std::string id = r->bg_id;
  // The log grows by `bytes` more: writes, each of which would be an event.
  auto grows = [&](std::size_t bytes) {
    const std::size_t from = read_file(r->log_file).size();
    return wait_until([&] { return read_file(r->log_file).size() > from + bytes; }, 5000ms);
  };
  ASSERT_TRUE(wait_for_text(r->log_file, "\n2\n", 5000ms));
  ASSERT_TRUE(grows(40));  // past an announcement of what came before the watch (early output)
  const size_t quiet = rec->count(Kind::output, id);
  EXPECT_LE(quiet, 1u);
  ASSERT_TRUE(grows(40));
  EXPECT_EQ(rec->count(Kind::output, id), quiet) << "writes nobody follows were announced";

  rec->follow(id);
  sup_->want_output(id);
  EXPECT_TRUE(rec->wait_count(Kind::output, id, quiet + 5, 5000ms)) << "a follower gets every write";

  rec->follow(id, false);
  // The watch goes quiet at the first write seen after this (it may be one
  // the follower was told of already).
  ASSERT_TRUE(grows(10));  // that write
  ASSERT_TRUE(grows(40));  // and time for its news
  const size_t after = rec->count(Kind::output, id);
  ASSERT_TRUE(grows(40));
  EXPECT_LE(rec->count(Kind::output, id), after + 1) << "still announced after the follower left";
  SBX_ASSERT_OK(sup_->stop(id));
  EXPECT_TRUE(rec->wait_count(Kind::ended, id, 1, 10000ms));
}

TEST_F(EventsTest, StopGivesEnded) {
  auto rec = std::make_shared<Recorder>();
  Subscription sub(sup_.get(), rec);
  auto r = sup_->start(argv({"/bin/sleep", "30"}));
  SBX_ASSERT_OK(r);
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  ASSERT_TRUE(rec->wait_count(Kind::ended, r->bg_id, 1, 10000ms));
  std::lock_guard g(rec->mu);
  EXPECT_EQ(rec->status_in_listener[r->bg_id].end_reason, "stopped");
}

TEST_F(EventsTest, RemovedAndUnsubscribe) {
  auto kept = std::make_shared<Recorder>();
  auto dropped = std::make_shared<Recorder>();
  Subscription sub_kept(sup_.get(), kept);
  Subscription sub_dropped(sup_.get(), dropped);
  auto r = sup_->start(shell("true"));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(kept->wait_count(Kind::ended, r->bg_id, 1, 5000ms));
  ASSERT_TRUE(dropped->wait_count(Kind::ended, r->bg_id, 1, 5000ms));
  SBX_ASSERT_OK(sup_->remove(r->bg_id));
  ASSERT_TRUE(kept->wait_count(Kind::removed, r->bg_id, 1, 5000ms));
  ASSERT_TRUE(dropped->wait_count(Kind::removed, r->bg_id, 1, 5000ms));
  EXPECT_FALSE(sup_->status(r->bg_id).has_value());

  sub_dropped.cancel();
  const size_t n = [&] {
    std::lock_guard g(dropped->mu);
    return dropped->events.size();
  }();
  auto r2 = sup_->start(shell("true"));
  SBX_ASSERT_OK(r2);
  ASSERT_TRUE(kept->wait_count(Kind::ended, r2->bg_id, 1, 5000ms));
  std::lock_guard g(dropped->mu);
  EXPECT_EQ(dropped->events.size(), n) << "an unsubscribed listener was called";
}

// ---- timers -----------------------------------------------------------------

TEST_F(EventsTest, TimerFiresOnEventThreadNotBefore) {
  struct Fired {
    std::mutex mu;
    std::optional<Clock::time_point> at;
    std::thread::id thread;
  };
  auto f = std::make_shared<Fired>();
  const auto t0 = Clock::now();
  sup_->add_timer(t0 + 100ms, [f] {
    std::lock_guard g(f->mu);
    f->at = Clock::now();
    f->thread = std::this_thread::get_id();
  });
  ASSERT_TRUE(wait_until([&] { std::lock_guard g(f->mu); return f->at.has_value(); }, 3000ms));
  std::lock_guard g(f->mu);
  EXPECT_GE(*f->at - t0, 99ms);
  EXPECT_LT(*f->at - t0, 1000ms);
  EXPECT_NE(f->thread, std::this_thread::get_id());
}

TEST_F(EventsTest, TimersFireInTimeOrder) {
  struct Order {
    std::mutex mu;
    std::vector<int> seen;
  };
  auto o = std::make_shared<Order>();
  const auto now = Clock::now();
  for (int ms : {150, 50, 100, 0}) {
    sup_->add_timer(now + std::chrono::milliseconds(ms), [o, ms] {
      std::lock_guard g(o->mu);
      o->seen.push_back(ms);
    });
  }
  ASSERT_TRUE(wait_until([&] { std::lock_guard g(o->mu); return o->seen.size() == 4; }, 3000ms));
  std::lock_guard g(o->mu);
  EXPECT_EQ(o->seen, (std::vector<int>{0, 50, 100, 150}));
}

TEST_F(EventsTest, CancelTimer) {
  auto fired = std::make_shared<std::atomic<int>>(0);
  auto fence = std::make_shared<std::atomic<bool>>(false);
  const auto now = Clock::now();
  auto t = sup_->add_timer(now + 200ms, [fired] { ++*fired; });
  EXPECT_TRUE(sup_->cancel_timer(t));
  EXPECT_FALSE(sup_->cancel_timer(t));  // already cancelled
  auto t2 = sup_->add_timer(Clock::now() + 10ms, [fired] { *fired += 10; });
  ASSERT_TRUE(wait_until([&] { return fired->load() >= 10; }, 3000ms));
  EXPECT_FALSE(sup_->cancel_timer(t2));  // already ran
  // Timers fire in time order: once this later one has, the cancelled one would have.
  sup_->add_timer(now + 300ms, [fence] { *fence = true; });
  ASSERT_TRUE(wait_until([&] { return fence->load(); }, 3000ms));
  EXPECT_EQ(fired->load(), 10) << "a cancelled timer ran";
}

TEST_F(EventsTest, PostAndTimerMayCallBack) {
  auto done = std::make_shared<std::atomic<int>>(0);
  sup::Supervisor* s = sup_.get();
  sup_->post([s, done] {
    (void)s->list();
    ++*done;
  });
  sup_->add_timer(Clock::now(), [s, done] {
    (void)s->info();
    s->post([done] { ++*done; });
  });
  EXPECT_TRUE(wait_until([&] { return done->load() == 2; }, 3000ms));
}

// ---- an idle supervisor costs nothing ----------------------------------------

TEST_F(EventsTest, IdleSupervisorUsesNoCpu) {
  constexpr int kCommands = 50;
  std::vector<std::string> ids;
  for (int i = 0; i < kCommands; ++i) {
    auto r = sup_->start(argv({"/bin/sleep", "30"}));
    SBX_ASSERT_OK(r);
    ids.push_back(r->bg_id);
  }
  std::vector<pid_t> monitors;
  for (const auto& id : ids) {
    auto mj = read_json(record_dir(id) + "/monitor.json");
    ASSERT_TRUE(mj && mj->contains("monitorPid")) << id;
    monitors.push_back((*mj)["monitorPid"].get<pid_t>());
  }
  auto sample = [&](unsigned long long* self, unsigned long long* mons) {
    *self = proc_cpu_ticks(::getpid());
    *mons = 0;
    for (pid_t m : monitors) *mons += proc_cpu_ticks(m);
  };
  // The start-up work is over once the spare folders are made again.
  ASSERT_TRUE(wait_until([&] { return whole_spares().size() >= sup::kStartFolderSpares; }, 20000ms, 10ms));
  // A loaded machine may still finish some of it late (or charge a tick
  // wrongly): the best of three windows counts. Work that never stops shows
  // in all three.
  long long self_d = 0, mons_d = 0;
  for (int window = 0; window < 3; ++window) {
    unsigned long long self0, mons0, self1, mons1;
    sample(&self0, &mons0);
    std::this_thread::sleep_for(2000ms);
    sample(&self1, &mons1);
    self_d = static_cast<long long>(self1 - self0);
    mons_d = static_cast<long long>(mons1 - mons0);
    if (self_d <= 5 && mons_d <= 5) break;
  }
  // A few ticks (10 ms each) of slack over 2 s for 51 processes.
  EXPECT_LE(self_d, 5) << "supervisor (this process) used " << self_d << " ticks in 2 s";
  EXPECT_LE(mons_d, 5) << kCommands << " monitors used " << mons_d << " ticks in 2 s";
  std::printf("idle CPU over 2 s: supervisor %lld ticks, %d monitors %lld ticks\n", self_d, kCommands, mons_d);

  for (const auto& id : ids) SBX_EXPECT_OK(sup_->stop(id));
  for (const auto& id : ids) {
    auto st = sup_->wait(id, 10000ms);
    ASSERT_TRUE(st);
    EXPECT_FALSE(st->running) << id;
    EXPECT_EQ(st->end_reason, "stopped") << id;
  }
  EXPECT_TRUE(wait_until([&] { return marked().empty(); }, 5000ms)) << pids_to_string(marked());
}

}  // namespace
