// The box's steps in the state directory: written as JSON lines per day,
// completed when a command ends, read back after a restart, pruned by age.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "supervisor/box_steps.hpp"
#include "supervisor/clock.hpp"
#include "supervisor/log_index.hpp"
#include "test_util.hpp"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class BoxStepsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tmp_.path() + "/steps"; }

  std::unique_ptr<sup::BoxSteps> open(std::chrono::seconds keep = std::chrono::hours(24 * 7)) {
    auto r = sup::BoxSteps::open(dir_, keep);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r.value()) : nullptr;
  }
  static sup::BoxStep step(std::string kind, std::string id, std::string summary = "x") {
    sup::BoxStep s;
    s.kind = std::move(kind);
    s.bg_id = std::move(id);
    s.summary = std::move(summary);
    s.ok = true;
    return s;
  }
  std::string today_file() const { return dir_ + "/" + sup::iso_now().substr(0, 10) + ".jsonl"; }

  sbxtest::TempDir tmp_{"sbx-steps"};
  std::string dir_;
};

TEST_F(BoxStepsTest, LatestShowsTheLastThirtyOldestFirst) {
  auto b = open();
  for (int i = 0; i < 40; ++i) b->add(step("start", "c" + std::to_string(i)));
  json latest = b->latest();
  ASSERT_EQ(latest.size(), sup::BoxSteps::kShown);
  EXPECT_EQ(latest.front()["bgId"], "c10");
  EXPECT_EQ(latest.back()["bgId"], "c39");
  EXPECT_EQ(json::parse(b->all()).size(), 40u);
  // Every field of a step, null where it does not apply.
  for (const char* k : {"at", "kind", "summary", "note", "bgId", "cwd", "client", "ms", "ok", "exitCode", "signal",
                        "timedOut", "error"})
    EXPECT_TRUE(latest.back().contains(k)) << k;
}

TEST_F(BoxStepsTest, AllIsTheArrayAsDumpWritesIt) {
  auto b = open();
  EXPECT_EQ(b->all(), "[]\n");
  for (int i = 0; i < 3; ++i) b->add(step("start", "c" + std::to_string(i), "line\nwith a newline"));
  const std::string text = b->all();
  EXPECT_EQ(text, json::parse(text).dump(2) + "\n");
  EXPECT_EQ(json::parse(text).size(), 3u);
}

TEST_F(BoxStepsTest, ACompletionFillsTheStepAndSurvivesAReopen) {
  {
    auto b = open();
    b->add(step("start", "a"), /*open_until_end=*/true);
    b->add(step("signal", "a"));
    b->add(step("stop", "a"), true);
    const std::int64_t end = sup::now_ms() + 1500;
    b->complete_ended("a", -1, "SIGTERM", false, end);
    json l = b->latest();
    EXPECT_EQ(l[0]["exitCode"], -1);
    EXPECT_EQ(l[0]["ok"], false) << "a start whose command a signal ended";
    EXPECT_GE(l[0]["ms"].get<double>(), 1400);
    EXPECT_EQ(l[1]["ms"], nullptr) << "a signal is not completed";
    EXPECT_EQ(l[2]["ok"], true) << "a stop that was carried out";
    EXPECT_EQ(l[2]["signal"], "SIGTERM");
  }
  auto b = open();
  json all = json::parse(b->all());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]["exitCode"], -1);
  EXPECT_EQ(all[2]["signal"], "SIGTERM");
  EXPECT_EQ(b->latest(), all);
}

TEST_F(BoxStepsTest, AnOpenStepIsCompletedByTheNextProcess) {
  { open()->add(step("start", "b"), true); }
  auto b = open();
  EXPECT_TRUE(b->has_open("b"));
  b->add(step("signal", "c"));
  EXPECT_FALSE(b->has_open("c")) << "a step not open until the end";
  b->complete_ended("b", 0, "", false, sup::now_ms());
  EXPECT_FALSE(b->has_open("b"));
  EXPECT_EQ(json::parse(b->all())[0]["ok"], true);
  EXPECT_EQ(json::parse(b->all())[0]["exitCode"], 0);
  EXPECT_EQ(b->latest()[0]["exitCode"], 0);
}

// A start's step is written before its command may run; a start that
// fails after that (the exec, or a daemon killed before the go) says so in
// a completion, and the step is no longer waiting for an end.
TEST_F(BoxStepsTest, AStartThatNeverRanAfterItsStepIsCompletedWithTheError) {
  {
    auto b = open();
    b->add(step("start", "a"), true);
    b->add(step("start", "b"), true);
    b->fail_open("a", {"ENOENT", "/x/bad: No such file or directory"});
    EXPECT_FALSE(b->has_open("a"));
    EXPECT_TRUE(b->has_open("b"));
    json l = b->latest();
    EXPECT_EQ(l[0]["ok"], false);
    EXPECT_EQ(l[0]["error"]["code"], "ENOENT");
    EXPECT_EQ(l[0]["ms"], nullptr);
    EXPECT_EQ(l[1]["ok"], true) << "another command's step";
    b->complete_ended("a", 0, "", false, sup::now_ms());  // no end comes for it: nothing changes
    EXPECT_EQ(b->latest()[0]["exitCode"], nullptr);
  }
  auto b = open();
  EXPECT_FALSE(b->has_open("a")) << "completed on disk: not waiting after a restart";
  EXPECT_TRUE(b->has_open("b"));
  json all = json::parse(b->all());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0]["ok"], false);
  EXPECT_EQ(all[0]["error"]["message"], "/x/bad: No such file or directory");
  EXPECT_EQ(all[0]["bgId"], "a");
  EXPECT_EQ(b->latest(), all);
}

TEST_F(BoxStepsTest, ARefusedStepKeepsItsError) {
  auto b = open();
  sup::BoxStep s = step("start", "", "{\"bogus\": 1}");
  s.ok = false;
  s.error = sup::BoxStep::Refusal{"EINVAL", "unknown key \"bogus\""};
  b->add(s);
  json j = json::parse(open()->all())[0];
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["error"]["code"], "EINVAL");
  EXPECT_EQ(j["bgId"], nullptr);
}

TEST_F(BoxStepsTest, ATornLastLineIsSkipped) {
  {
    auto b = open();
    b->add(step("start", "a"));
    b->add(step("start", "b"));
  }
  {
    std::ofstream f(today_file(), std::ios::app);
    f << "{\"id\": 99, \"at\": \"2026";  // a crash mid-write
  }
  auto b = open();
  EXPECT_EQ(json::parse(b->all()).size(), 2u);
  b->add(step("start", "c"));
  EXPECT_EQ(json::parse(b->all()).size(), 3u) << "a later step is still read after the torn line";
}

TEST_F(BoxStepsTest, OldStepsAndDayFilesArePruned) {
  // A day file from long ago is removed at open; a step older than the keep
  // time is not shown even while its file stays.
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  const std::string old_file = dir_ + "/2020-01-01.jsonl";
  {
    std::ofstream f(old_file);
    f << R"({"id": 1, "at": "2020-01-01T10:00:00.000Z", "kind": "start", "summary": "ancient"})" << "\n";
  }
  auto b = open(std::chrono::seconds(2));
  struct stat st {};
  EXPECT_NE(::stat(old_file.c_str(), &st), 0) << "the 2020 file is gone";
  b->add(step("start", "now"));
  EXPECT_EQ(json::parse(b->all()).size(), 1u);
  EXPECT_TRUE(sbxtest::wait_until([&] { return json::parse(b->all()).empty() && b->latest().empty(); }, 10s));
  // keep 0: forever.
  auto forever = open(std::chrono::seconds(0));
  EXPECT_EQ(json::parse(forever->all()).size(), 1u);
}

TEST_F(BoxStepsTest, AnIdIsNotGivenAgainAfterItsStepExpired) {
  // A step written an hour ago, open (its command still runs), hidden by a
  // keep of a minute: a new step must not take its id, or that command's
  // end would complete the new one.
  ASSERT_EQ(::mkdir(dir_.c_str(), 0700), 0);
  {
    std::ofstream f(today_file());
    f << json({{"id", 7}, {"at", sup::iso_of_us((sup::now_ms() - 3600 * 1000) * 1000)}, {"kind", "start"},
               {"summary", "sleep 3600"}, {"bgId", "0001"}, {"ok", true}})
             .dump()
      << "\n";
  }
  {
    auto b = open(std::chrono::seconds(60));
    EXPECT_TRUE(b->latest().empty());
    EXPECT_EQ(b->add(step("start", "0002", "true"), true), 8u);
    b->complete_ended("0002", 0, "", false, sup::now_ms());
  }
  // A daemon that keeps a week again: the old start is shown, still open,
  // and completed by its own command's end alone.
  auto b = open();
  ASSERT_TRUE(b->has_open("0001"));
  b->complete_ended("0001", 0, "", false, sup::now_ms());
  const json all = json::parse(b->all());
  ASSERT_EQ(all.size(), 2u) << all.dump();
  EXPECT_EQ(all[0]["summary"], "sleep 3600");
  EXPECT_GE(all[0]["ms"].get<long>(), 3600 * 1000 - 1000) << all.dump();
  EXPECT_EQ(all[1]["summary"], "true");
  EXPECT_LT(all[1]["ms"].get<long>(), 60 * 1000) << all.dump();
}

TEST_F(BoxStepsTest, SummariesAreCutAtACharacter) {
  auto b = open();
  std::string text;
  for (int i = 0; i < 300; ++i) text += "\xc3\xa9";  // é, two bytes each
  b->add(step("start", "a", text));
  const std::string shown = b->latest()[0]["summary"].get<std::string>();
  EXPECT_EQ(shown, sup::BoxSteps::cut(text));
  EXPECT_TRUE(shown.ends_with("\u2026"));
  EXPECT_EQ(shown.size(), 199u * 2 + 3);
  EXPECT_EQ(sup::BoxSteps::cut("short"), "short");
}

TEST_F(BoxStepsTest, ASummaryLosesTheNewlineItWasWrittenWith) {
  auto b = open();
  b->add(step("ready", "a", "ready when log Listening\n"));
  b->add(step("start", "b", "echo one\necho two\r\n"));
  EXPECT_EQ(b->latest()[0]["summary"], "ready when log Listening");
  EXPECT_EQ(b->latest()[1]["summary"], "echo one\necho two");
}

TEST_F(BoxStepsTest, IsoTimesRoundTrip) {
  EXPECT_EQ(sup::iso_to_ms("1970-01-01T00:00:01.250Z"), 1250);
  EXPECT_EQ(sup::iso_to_ms("2026-12-01T00:00:00.000Z"), 1796083200000LL);
  EXPECT_FALSE(sup::iso_to_ms("2026-12-01 00:00:00"));
  EXPECT_FALSE(sup::iso_to_ms("2026-12-01T00:00:0x.000Z"));
  const std::int64_t now = sup::now_ms();
  const std::optional<std::int64_t> parsed = sup::iso_to_ms(sup::iso_now());
  ASSERT_TRUE(parsed);
  EXPECT_LE(std::abs(*parsed - now), 1000);
}

}  // namespace
