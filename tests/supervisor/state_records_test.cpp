// The state directory's record files (exit.json, monitor.json, ready.json,
// slot) through their one writer and one reader, and atomic writes.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/atomic_write.hpp"
#include "supervisor/exit_record.hpp"
#include "supervisor/json_text.hpp"
#include "supervisor/monitor_record.hpp"
#include "supervisor/ready_record.hpp"
#include "supervisor/slot_record.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

TEST(ExitRecord, WrittenAndReadBack) {
  sup::ExitInfo e;
  e.exit_code = -1;
  e.signal = "SIGTERM";
  e.end_reason = "stopped";
  e.finished_at = "2026-12-01T10:00:00.123Z";
  e.timed_out = true;
  e.oom = true;
  e.output_lost = 42;
  e.end_note = "a \"quoted\"\nnote\\";
  const std::string text = sup::format_exit(e);
  EXPECT_EQ(text.back(), '\n');
  const nlohmann::json j = nlohmann::json::parse(text);  // valid JSON
  EXPECT_EQ(j["signal"], "SIGTERM");
  EXPECT_EQ(j["oom"], true);
  auto back = sup::parse_exit(text);
  SBX_ASSERT_OK(back);
  EXPECT_EQ(back->exit_code, -1);
  EXPECT_EQ(back->signal, "SIGTERM");
  EXPECT_EQ(back->end_reason, "stopped");
  EXPECT_EQ(back->finished_at, e.finished_at);
  EXPECT_TRUE(back->timed_out);
  EXPECT_TRUE(back->oom);
  EXPECT_EQ(back->output_lost, 42u);
  EXPECT_EQ(back->end_note, e.end_note);
}

TEST(ExitRecord, NoSignalIsNullAndNoNoteIsAbsent) {
  sup::ExitInfo e;
  e.exit_code = 3;
  e.end_reason = "exited";
  e.finished_at = "2026-12-01T10:00:00.123Z";
  const nlohmann::json j = nlohmann::json::parse(sup::format_exit(e));
  EXPECT_TRUE(j["signal"].is_null());
  EXPECT_FALSE(j.contains("endNote"));
  EXPECT_EQ(j["exitCode"], 3);
  EXPECT_EQ(j["outputLost"], 0);
}

// What monitors of earlier builds wrote: a real-time signal by number.
TEST(ExitRecord, AnOldRecordsNumberedSignalIsNamed) {
  const std::string old = "{\"exitCode\": -1, \"signal\": \"SIG" + std::to_string(SIGRTMIN) +
                          "\", \"endReason\": \"killed\", \"timedOut\": false, "
                          "\"finishedAt\": \"2026-11-29T22:16:01.002Z\", \"oom\": false, \"outputLost\": 0}\n";
  auto e = sup::parse_exit(old);
  SBX_ASSERT_OK(e);
  EXPECT_EQ(e->signal, "SIGRTMIN");
  auto e2 = sup::parse_exit("{\"exitCode\": -1, \"signal\": \"SIG" + std::to_string(SIGRTMIN + 2) +
                            "\", \"endReason\": \"killed\"}");
  SBX_ASSERT_OK(e2);
  EXPECT_EQ(e2->signal, "SIGRTMIN+2");
  // A supervisor of an earlier build wrote no outputLost; its keys sorted.
  auto e3 = sup::parse_exit(
      "{\"endNote\":\"n\",\"endReason\":\"unknown\",\"exitCode\":-1,\"finishedAt\":\"x\",\"oom\":false,"
      "\"signal\":null,\"timedOut\":false}\n");
  SBX_ASSERT_OK(e3);
  EXPECT_EQ(e3->end_note, "n");
  EXPECT_EQ(e3->signal, "");
}

TEST(ExitRecord, TornOrWrongIsAnIoError) {
  for (const char* text : {"", "{\"exitCode\": 0, \"sig", "[]", "{\"exitCode\": \"zero\", \"endReason\": \"x\"}",
                           "{\"exitCode\": 0}"}) {
    auto e = sup::parse_exit(text);
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_EQ(e.error().code, sup::Errc::io_error);
    EXPECT_NE(e.error().message.find("exit.json"), std::string::npos);
  }
}

TEST(MonitorRecord, WrittenAndReadBack) {
  sup::MonitorInfo m;
  m.monitor_pid = 4241;
  m.monitor_start = 123456;
  m.pid = 4242;
  m.pid_start = 123457;
  m.started_at = "2026-11-29T22:15:47.123Z";
  auto back = sup::parse_monitor(sup::format_monitor(m));
  SBX_ASSERT_OK(back);
  EXPECT_EQ(back->monitor_pid, 4241);
  EXPECT_EQ(back->monitor_start, 123456u);
  EXPECT_EQ(back->pid, 4242);
  EXPECT_EQ(back->pid_start, 123457u);
  EXPECT_EQ(back->started_at, m.started_at);
  auto bad = sup::parse_monitor("{\"monitorPid\": 1}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, sup::Errc::io_error);
}

TEST(JsonText, QuotesWhatJsonNeeds) {
  const std::string raw = std::string("a\"b\\c\nd\te\x01") + "\xc3\xa9";
  const std::string q = sup::json_quote(raw);
  EXPECT_EQ(nlohmann::json::parse(q).get<std::string>(), raw);
}

TEST(AtomicWrite, ReplacesWholeAndLeavesNoTmp) {
  TempDir dir;
  const int dfd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  ASSERT_EQ(sup::write_file_atomic_at(dfd, "f", "a long first content\n"), 0);
  ASSERT_EQ(sup::write_file_atomic_at(dfd, "f", "short\n", true), 0);
  EXPECT_EQ(read_file(dir.path() + "/f"), "short\n");
  EXPECT_FALSE(file_exists(dir.path() + "/f.tmp"));
  // Into space reserved beforehand: cut to size, no blanks left.
  ASSERT_EQ(sup::reserve_file(dfd, "g.tmp", 1024), 0);
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() + "/g.tmp").c_str(), &st), 0);
  EXPECT_GE(st.st_size, 1024);
  ASSERT_EQ(sup::write_file_atomic_at(dfd, "g", "{}\n"), 0);
  EXPECT_EQ(read_file(dir.path() + "/g"), "{}\n");
  // A failure names its step and leaves nothing behind.
  const char* step = nullptr;
  EXPECT_EQ(sup::write_file_atomic_at(dfd, "no/such/f", "x", false, &step), ENOENT);
  EXPECT_STREQ(step, "create");
  ::close(dfd);
}

}  // namespace

namespace {

using namespace sbxtest;
using StateRecordsTest = SupervisorTest;

// The monitor and the daemon name a real-time signal alike.
TEST_F(StateRecordsTest, ARealTimeSignalDeathIsNamedInExitJson) {
  auto r = sup_->start(argv({"/bin/sh", "-c", "kill -" + std::to_string(SIGRTMIN + 1) + " $$"}));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 5000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->signal, "SIGRTMIN+1");
  EXPECT_EQ(st->end_reason, "killed");
  auto j = read_json(record_dir(r->bg_id) + "/exit.json");
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)["signal"], "SIGRTMIN+1");
}

}  // namespace

namespace {

TEST(ReadyRecord, WrittenAndReadBack) {
  auto c = sup::parse_ready_condition("port 3000");
  ASSERT_TRUE(c.ok());
  sup::ReadyMatch m;
  m.kind = sup::ReadyCondition::Kind::port;
  m.port = 3000;
  sup::ReadyRecord r{*c, true, "2026-12-01T10:00:00.123Z", m};
  auto back = sup::parse_ready(sup::format_ready(r));
  ASSERT_TRUE(back);
  ASSERT_TRUE(back->matched);
  EXPECT_EQ(back->matched->to_json(), m.to_json());
  ASSERT_TRUE(back->condition);
  EXPECT_EQ(back->condition->describe(), "port 3000");
  EXPECT_TRUE(back->ready);
  EXPECT_EQ(back->ready_at, r.ready_at);
  // No condition, not ready: readyAt null.
  auto none = sup::parse_ready(sup::format_ready(sup::ReadyRecord{}));
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->condition);
  EXPECT_FALSE(none->ready);
  EXPECT_EQ(none->ready_at, "");
  EXPECT_FALSE(sup::parse_ready("{\"ready\": tr"));
  auto odd = sup::parse_ready("{\"ready\": \"yes\", \"condition\": {\"readyPort\": \"x\"}}");
  ASSERT_TRUE(odd);
  EXPECT_FALSE(odd->ready);
  EXPECT_FALSE(odd->condition);
}

TEST(SlotRecord, WrittenAndReadBack) {
  auto o = sup::parse_slot(sup::format_slot(sup::SlotOwner{1000, 4242}));
  EXPECT_EQ(o.uid, 1000u);
  EXPECT_EQ(o.sid, 4242);
  auto torn = sup::parse_slot("{\"ownerUid\": 10");
  EXPECT_EQ(torn.uid, 0u);
  auto wrong = sup::parse_slot("{\"ownerUid\": \"me\"}");
  EXPECT_EQ(wrong.uid, 0u);
}

}  // namespace
