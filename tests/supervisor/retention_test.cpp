// Which ended records go first (EndedRecords, no processes) and the
// supervisor applying keep_ended / keep_ended_sec / max_running to real
// commands.
#include "supervisor/retention.hpp"

#include <cstdlib>

#include "supervisor/clock.hpp"

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::EndedRecords;
using sup::Errc;
using sup::RetentionPolicy;

RetentionPolicy keep(std::size_t n, std::chrono::seconds age = std::chrono::seconds(0)) {
  RetentionPolicy p;
  p.keep = n;
  p.max_age = age;
  return p;
}

TEST(EndedRecordsTest, CountLimitTakesTheOldestFirst) {
  EndedRecords e;
  e.add("c", 3000);
  e.add("a", 1000);
  e.add("b", 2000);
  e.add("a2", 1000);  // same end time: bgId order
  EXPECT_EQ(e.due(10000, keep(4)), std::vector<std::string>{});
  EXPECT_EQ(e.due(10000, keep(2)), (std::vector<std::string>{"a", "a2"}));
  EXPECT_EQ(e.due(10000, keep(0)), std::vector<std::string>{}) << "0: no count limit";
  e.erase("a");
  e.erase("nothing");
  EXPECT_EQ(e.size(), 3u);
  EXPECT_EQ(e.due(10000, keep(1)), (std::vector<std::string>{"a2", "b"}));
  e.add("a2", 5000);  // ended again (a named command restarted): moves
  EXPECT_EQ(e.due(10000, keep(1)), (std::vector<std::string>{"b", "c"}));
}

TEST(EndedRecordsTest, PastTheCountTheUserWithTheMostLosesTheirOldest) {
  // A shared box: one user's flood of commands pushes out their own
  // records, not the other user's older one.
  EndedRecords e;
  e.add("b1", 1000, 1000);
  for (int i = 1; i <= 5; ++i) e.add("f" + std::to_string(i), 1000 + i * 1000, 2000);
  EXPECT_EQ(e.due(10000, keep(4)), (std::vector<std::string>{"f1", "f2"}));
  // Left with as many: the older record goes first.
  EXPECT_EQ(e.due(10000, keep(1)), (std::vector<std::string>{"b1", "f1", "f2", "f3", "f4"}));
  // The age limit is everyone's.
  EXPECT_EQ(e.due(12500, keep(4, std::chrono::seconds(10))), (std::vector<std::string>{"b1", "f1"}));
  e.erase("f1");
  e.add("b1", 9000, 1000);  // ended again: moves, and stays that user's
  EXPECT_EQ(e.due(10000, keep(3)), (std::vector<std::string>{"f2", "f3"}));
  for (const char* id : {"f2", "f3", "f4", "f5"}) e.erase(id);
  EXPECT_EQ(e.size(), 1u);
  EXPECT_EQ(e.due(10000, keep(0)), std::vector<std::string>{});
}

TEST(EndedRecordsTest, AgeLimitAndItsNextExpiry) {
  EndedRecords e;
  EXPECT_EQ(e.next_expiry(keep(0, std::chrono::seconds(10))), std::nullopt);
  e.add("old", 1000);
  e.add("new", 8000);
  EXPECT_EQ(e.next_expiry(keep(0)), std::nullopt) << "no age limit";
  EXPECT_EQ(e.next_expiry(keep(0, std::chrono::seconds(10))), 11000);
  EXPECT_EQ(e.due(11000, keep(0, std::chrono::seconds(10))), std::vector<std::string>{});
  EXPECT_EQ(e.due(11001, keep(0, std::chrono::seconds(10))), std::vector<std::string>{"old"});
  EXPECT_EQ(e.due(20000, keep(0, std::chrono::seconds(10))), (std::vector<std::string>{"old", "new"}));
  // Both limits: whichever takes more.
  EXPECT_EQ(e.due(11001, keep(5, std::chrono::seconds(10))), std::vector<std::string>{"old"});
  EXPECT_EQ(e.due(5000, keep(1, std::chrono::seconds(10))), std::vector<std::string>{"old"});
}

TEST(EndedRecordsTest, ParsesTheRecordsTimestamps) {
  EXPECT_EQ(sup::iso_to_ms("1970-01-01T00:00:01.250Z"), 1250);
  EXPECT_EQ(sup::iso_to_ms("2026-11-29T22:15:47.123Z"), 1795990547123);
  EXPECT_EQ(sup::iso_to_ms(""), std::nullopt);
  EXPECT_EQ(sup::iso_to_ms("2026-11-29T22:15:47Z"), std::nullopt);
  EXPECT_EQ(sup::iso_to_ms("2026-11-29T22:15:47.123Zjunk"), std::nullopt);
  const auto now = sup::now_ms();
  const auto parsed = sup::iso_to_ms(sup::iso_now());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_LE(std::abs(*parsed - now), 1000);
}

class LimitsTest : public SupervisorTest {
 protected:
  bool open_in_setup() const override { return false; }

  void open_with(RetentionPolicy r, std::size_t max_running = 1000) {
    sup_.reset();
    sup::SupervisorOptions o;
    o.state_dir = state_dir();
    o.monitor_path = SBX_MONITOR_PATH;
    o.retention = r;
    o.max_running = max_running;
    auto opened = sup::Supervisor::open(std::move(o));
    ASSERT_TRUE(opened.ok()) << describe(opened.error());
    sup_ = std::move(opened.value());
  }

  std::string run_to_end(const std::string& name = "") {
    auto r = sup_->start(argv({"/bin/true"}, name));
    if (!r.ok()) {
      ADD_FAILURE() << describe(r.error());
      return "";
    }
    wait_ended(r->bg_id);
    return r->bg_id;
  }

  bool gone(const std::string& id) {
    return wait_until([&] { return !sup_->status(id) && !file_exists(record_dir(id)); }, 5000ms);
  }
};

TEST_F(LimitsTest, KeepEndedRemovesTheOldestEndedOnly) {
  open_with(keep(2));
  auto running = sup_->start(argv({"sleep", "30"}));  // the oldest record of all, but running
  SBX_ASSERT_OK(running);
  SBX_ASSERT_OK(sup_->create_slot("slot", ::getuid(), 0));
  const std::string a = run_to_end(), b = run_to_end("named"), c = run_to_end();
  EXPECT_TRUE(gone(a)) << a << " should have been removed: more than 2 ended";
  EXPECT_TRUE(sup_->status(b).has_value());
  EXPECT_TRUE(sup_->status(c).has_value());
  EXPECT_TRUE(file_exists(record_dir(c) + "/exit.json"));
  auto r = sup_->status(running->bg_id);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->running) << "a running command is never removed";
  EXPECT_EQ(sup_->status("slot")->state, "empty") << "an empty slot is not an ended record";
  const std::string d = run_to_end();
  EXPECT_TRUE(gone(b)) << "a named command that ended goes like any other";
  EXPECT_TRUE(sup_->status(c).has_value() && sup_->status(d).has_value());
  // No leftovers of the deletes (removed just after the record is unpublished).
  EXPECT_TRUE(wait_until(
      [&] {
        for (const std::string& name : dir_entries(procs_dir()))
          if (name[0] == '.') return false;
        return true;
      },
      5000ms));
  SBX_EXPECT_OK(sup_->stop(running->bg_id));
}

TEST_F(LimitsTest, KeepEndedTakesFromTheUserWithTheMost) {
  open_with(keep(2));
  sup::StartSpec other = argv({"/bin/true"});
  other.requester_uid = 4242;  // another user's record (the owner; it runs as this test's user)
  auto x = sup_->start(other);
  SBX_ASSERT_OK(x);
  wait_ended(x->bg_id);
  const std::string a = run_to_end(), b = run_to_end(), c = run_to_end();
  EXPECT_TRUE(gone(a));
  EXPECT_TRUE(gone(b));
  EXPECT_TRUE(sup_->status(c).has_value());
  EXPECT_TRUE(sup_->status(x->bg_id).has_value()) << "the oldest, but its user's only one";
}

TEST_F(LimitsTest, KeepEndedIsAppliedWhenTheStateIsLoaded) {
  open_with(keep(0));
  const std::string a = run_to_end(), b = run_to_end(), c = run_to_end();
  open_with(keep(1));
  EXPECT_FALSE(sup_->status(a).has_value());
  EXPECT_FALSE(sup_->status(b).has_value());
  EXPECT_TRUE(sup_->status(c).has_value());
  EXPECT_FALSE(file_exists(record_dir(a)));
  // Ids are never reused, also after records were removed.
  auto next = sup_->start(argv({"/bin/true"}));
  SBX_ASSERT_OK(next);
  EXPECT_GT(next->bg_id, c);
  wait_ended(next->bg_id);
}

TEST_F(LimitsTest, AnUnknownEndTimeIsNotTakenForLongAgo) {
  open_with(keep(0));
  const std::string a = run_to_end();
  sup_.reset();
  write_file(record_dir(a) + "/exit.json", "{ torn");
  open_with(keep(0, std::chrono::seconds(3600)));
  auto st = sup_->status(a);
  ASSERT_TRUE(st.has_value()) << "removed by the age limit at load";
  EXPECT_EQ(st->state, "error");
}

TEST_F(LimitsTest, KeepEndedSecRemovesOnceOld) {
  open_with(keep(0, std::chrono::seconds(1)));
  auto running = sup_->start(argv({"sleep", "30"}));
  SBX_ASSERT_OK(running);
  const auto t0 = Clock::now();
  const std::string a = run_to_end();
  EXPECT_TRUE(sup_->status(a).has_value()) << "removed before it was a second old";
  EXPECT_TRUE(gone(a)) << "still there well after keep_ended_sec";
  EXPECT_GE(seconds_since(t0), 0.9);
  EXPECT_TRUE(sup_->status(running->bg_id)->running);
  SBX_EXPECT_OK(sup_->stop(running->bg_id));
}

TEST_F(LimitsTest, MaxRunningRefusesWithTryAgainAndCreatesNothing) {
  open_with(keep(0), 2);
  auto a = sup_->start(argv({"sleep", "30"}));
  auto b = sup_->start(argv({"sleep", "30"}, "two"));
  SBX_ASSERT_OK(a);
  SBX_ASSERT_OK(b);
  const auto dirs = dir_entries(procs_dir());
  auto c = sup_->start(argv({"sleep", "30"}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, Errc::try_again);
  EXPECT_NE(c.error().message.find("max_running=2"), std::string::npos) << c.error().message;
  EXPECT_EQ(dir_entries(procs_dir()), dirs);
  EXPECT_EQ(sup_->list().size(), 2u);
  // An empty slot is not running.
  SBX_EXPECT_OK(sup_->create_slot("slot", ::getuid(), 0));
  // Once one has ended there is room again.
  auto stopped = sup_->stop_and_wait(a->bg_id, 10000ms);
  ASSERT_TRUE(stopped && !stopped->running);
  auto d = sup_->start(argv({"sleep", "30"}));
  SBX_ASSERT_OK(d);
  // Running commands taken back on load count too.
  open_with(keep(0), 2);
  auto e = sup_->start(argv({"sleep", "30"}));
  ASSERT_FALSE(e.ok()) << "started " << e->bg_id;
  EXPECT_EQ(e.error().code, Errc::try_again);
  SBX_EXPECT_OK(sup_->stop(b->bg_id));
  SBX_EXPECT_OK(sup_->stop(d->bg_id));
}

}  // namespace
