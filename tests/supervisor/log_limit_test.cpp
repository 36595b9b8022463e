// log_max: the log keeps the first bytes of output, one marker line, and
// the monitor drains and counts the rest without stalling the command.
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

constexpr std::uint64_t kCap = 1000;

std::string marker(bool after_newline) {
  return std::string(after_newline ? "" : "\n") +
         "[sbxfs: log_max (1000 bytes) reached: later output is counted in droppedBytes, not kept]\n";
}

class LogLimitTest : public SupervisorTest {
 protected:
  void SetUp() override {
    log_max_ = kCap;
    SupervisorTest::SetUp();
  }
};

TEST_F(LogLimitTest, KeepsTheFirstBytesAndCountsTheRest) {
  // 300 000 bytes through a pipe that holds 64 KiB: the command only ends
  // if the monitor keeps draining past the cap.
  auto r = sup_->start(shell("head -c 300000 /dev/zero | tr '\\0' a; printf E >&2"));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 20000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_TRUE(st->truncated);
  EXPECT_EQ(st->dropped_bytes, 300001 - kCap);
  const std::string kept(kCap, 'a');
  EXPECT_EQ(read_file(st->log_file), kept + marker(false));
  EXPECT_EQ(read_stream(st->stdout_file), kept + marker(false));
  // The marker is in both streams views, as the log has it.
  EXPECT_EQ(read_stream(st->stderr_file), marker(false)) << "stderr lost its only byte";
  const nlohmann::json j = st->to_json();
  EXPECT_EQ(j.value("truncated", false), true) << j.dump();
  EXPECT_EQ(j.value("droppedBytes", 0u), 300001 - kCap) << j.dump();
}

TEST_F(LogLimitTest, ExactlyTheCapIsNotTruncated) {
  auto r = sup_->start(shell("head -c 1000 /dev/zero"));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->truncated);
  EXPECT_EQ(st->dropped_bytes, 0u);
  EXPECT_EQ(read_file(st->log_file), std::string(kCap, '\0'));
  EXPECT_FALSE(file_exists(record_dir(r->bg_id) + "/dropped"));
  EXPECT_EQ(st->to_json().value("truncated", true), false);
}

TEST_F(LogLimitTest, TruncationShowsWhileRunningAndAfterARestart) {
  auto r = sup_->start(shell("printf 'line\\n'; head -c 5000 /dev/zero; exec sleep 30"));
  SBX_ASSERT_OK(r);
  const std::string id = r->bg_id;
  auto dropped = [&] {
    auto st = sup_->status(id);
    return st && st->running && st->truncated && st->dropped_bytes == 5005 - kCap;
  };
  ASSERT_TRUE(wait_until(dropped, 5000ms)) << "a running command's status shows what was dropped";
  EXPECT_EQ(read_file(record_dir(id) + "/log"), "line\n" + std::string(kCap - 5, '\0') + marker(false));

  reopen();
  ASSERT_TRUE(wait_until(dropped, 5000ms)) << "and so does the next supervisor's";
  SBX_ASSERT_OK(sup_->stop(id));
  auto st = wait_ended(id, 10000ms);
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->truncated);
  EXPECT_EQ(st->dropped_bytes, 5005 - kCap);
}

}  // namespace
