// Logs: byte-exact copies of binary output, stdout/stderr kept apart, and
// the combined log in the order the command wrote.
#include <cstring>
#include <random>

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

using LogsTest = SupervisorTest;

// Equality of two big byte strings with a readable failure.
::testing::AssertionResult SameBytes(const std::string& got, const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return ::testing::AssertionFailure() << "size " << got.size() << " vs expected " << want.size()
                                       << ", first difference at byte " << i;
}

TEST_F(LogsTest, RandomBinaryIsByteExact) {
  std::string data(10 << 20, '\0');
  std::mt19937_64 rng(20261129);
  for (size_t i = 0; i + 8 <= data.size(); i += 8) {
    std::uint64_t v = rng();
    std::memcpy(&data[i], &v, 8);
  }
  const std::string file = work_ / "random.bin";
  write_file(file, data);
  ASSERT_EQ(fs::file_size(file), data.size());

  auto r = sup_->start(argv({"/bin/cat", file}));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 30000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_TRUE(SameBytes(read_file(st->log_file), data)) << "log";
  EXPECT_TRUE(SameBytes(read_stream(st->stdout_file), data)) << "stdout";
  EXPECT_EQ(read_stream(st->stderr_file), "");
}

TEST_F(LogsTest, StdoutAndStderrAreSeparate) {
  auto r = sup_->start(shell("printf out1; printf err1 >&2; printf out2; printf err2 >&2"));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(read_stream(st->stdout_file), "out1out2");
  EXPECT_EQ(read_stream(st->stderr_file), "err1err2");
  const std::string log = read_file(st->log_file);
  EXPECT_EQ(log.size(), 16u) << log;
  // Whatever the interleaving, each stream's own order is kept.
  auto o1 = log.find("out1"), o2 = log.find("out2"), e1 = log.find("err1"), e2 = log.find("err2");
  EXPECT_TRUE(o1 != std::string::npos && o2 != std::string::npos && o1 < o2) << log;
  EXPECT_TRUE(e1 != std::string::npos && e2 != std::string::npos && e1 < e2) << log;
}

// A stream whose pipe held 16 KiB or more at a read is grown to 1 MiB, so
// a fast writer blocks less (bench/RESULTS.md, "Capture: the writer sets
// the pace"); one that prints little keeps the default size. One write of
// 32 KiB into an empty default pipe (64 KiB) is done under the pipe's
// lock, so the relay's first read finds it all; stderr gets small writes.
TEST_F(LogsTest, APipeThatHeldMuchIsGrown) {
  auto r = sup_->start(argv({"python3", "-c", R"(
import fcntl, os, sys, time
os.write(1, b'x' * 32768)
size = lambda fd: fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ
end = time.monotonic() + 20
while size(1) != 1048576 and time.monotonic() < end: time.sleep(0.01)
os.write(2, b'e')
os.write(2, f'{size(1)} {size(2)}'.encode())
)"}));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 30000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_EQ(read_stream(st->stdout_file).size(), 32768u);
  EXPECT_EQ(read_stream(st->stderr_file), "e1048576 65536");
}

// Both streams printing as fast as they can: the relay reads a stream again
// at once while it has more, but in turn with the other and for a bounded
// number of reads, so neither stream waits for the other and a stop is
// heard while the output never pauses.
TEST_F(LogsTest, OutputThatNeverPausesStarvesNeitherTheOtherStreamNorAStop) {
  log_max_ = 1 << 20;  // what it prints past that is dropped, not kept on disk
  reopen();
  auto r = sup_->start(shell("yes out & exec yes err >&2"));
  SBX_ASSERT_OK(r);
  const std::string dir = record_dir(r->bg_id);
  const auto both_printed = [&] {
    sup::LogIndex index;
    return index.open(dir) == 0 && index.stream_size(sup::LogStream::out) >= 64 * 1024 &&
           index.stream_size(sup::LogStream::err) >= 64 * 1024;
  };
  EXPECT_TRUE(wait_until(both_printed, 10000ms));
  const auto t0 = Clock::now();
  auto st = sup_->stop_and_wait(r->bg_id, 20000ms);
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->running);
  EXPECT_EQ(st->end_reason, "stopped");
  EXPECT_LT(seconds_since(t0), 5.0);
}

TEST_F(LogsTest, CombinedLogKeepsWriteOrder) {
  // Each piece is written only once the previous one is in the log (the
  // path FORMAT.md gives a named command), so the order is known exactly.
  const std::string name = "inter";
  const std::string log_path = record_dir(name) + "/log";
  auto spec = shell(
      "step() { until grep -qx \"$1\" \"$LOG\" 2>/dev/null; do :; done; }\n"
      "echo o1; step o1\n"
      "echo e1 >&2; step e1\n"
      "echo o2; step o2\n"
      "echo e2 >&2; step e2\n"
      "echo o3; step o3\n"
      "echo e3 >&2\n",
      name);
  spec.env["LOG"] = log_path;
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  auto st = wait_ended(name, 15000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_EQ(read_file(st->log_file), "o1\ne1\no2\ne2\no3\ne3\n");
  EXPECT_EQ(read_stream(st->stdout_file), "o1\no2\no3\n");
  EXPECT_EQ(read_stream(st->stderr_file), "e1\ne2\ne3\n");
  // The status paths are those of FORMAT.md.
  std::error_code ec;
  EXPECT_TRUE(fs::equivalent(st->log_file, log_path, ec)) << st->log_file;
}

TEST_F(LogsTest, LogGrowsWhileRunning) {
  const std::string flag = work_ / "go";
  auto r = sup_->start(shell("echo first; until [ -e '" + flag + "' ]; do sleep 0.02; done; echo second; sleep 30"));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_for_text(r->log_file, "first\n")) << read_file(r->log_file);
  EXPECT_EQ(read_file(r->log_file), "first\n");
  write_file(flag, "");
  ASSERT_TRUE(wait_for_text(r->log_file, "second\n")) << read_file(r->log_file);
  EXPECT_EQ(read_file(r->log_file), "first\nsecond\n");
  EXPECT_TRUE(sup_->status(r->bg_id)->running);
}

// stdout and stderr are created at their first byte (a file created is
// time on every start): a silent command has none, and readers see them
// empty; the log is always there.
TEST_F(LogsTest, NoOutputCreatesNoStreamFiles) {
  auto r = sup_->start(argv({"/bin/true"}));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_TRUE(file_exists(st->log_file));
  for (const auto& f : {st->stdout_file, st->stderr_file}) EXPECT_FALSE(file_exists(f)) << f;
  EXPECT_EQ(read_file(st->log_file), "");
  EXPECT_EQ(read_stream(st->stdout_file), "");
  EXPECT_EQ(read_stream(st->stderr_file), "");
}

}  // namespace
