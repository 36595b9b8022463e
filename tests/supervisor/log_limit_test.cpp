// log_max: the log keeps the first half of log_max and the latest output up
// to the other half (tail segments the monitor rotates), the monitor drains
// the rest without stalling the command and counts what is gone.
#include <dirent.h>
#include <signal.h>

#include <algorithm>

#include "supervisor/log_view.hpp"
#include "supervisor/proc_tree.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::LogSelection;

constexpr std::uint64_t kCap = 1000;  // a head of 500, segments of 250

std::string marker(bool after_newline) {
  return std::string(after_newline ? "" : "\n") + sup::log_marker_line(kCap);
}

std::string view(const std::string& dir, LogSelection sel) {
  return sup::log_view_end(dir, sel, SIZE_MAX, {}, 0, false).value_or("(no index)");
}

/// Bytes of output kept after the head, as the index says.
std::uint64_t kept_in_tail(const std::string& dir) {
  sup::LogIndex idx;
  EXPECT_EQ(idx.open(dir), 0);
  return idx.size(LogSelection::all) - idx.kept_start(LogSelection::all);
}

/// Bytes of the files the record's log takes in the state directory.
std::uint64_t log_files_size(const std::string& dir) {
  std::uint64_t total = 0;
  DIR* d = ::opendir(dir.c_str());
  while (const dirent* e = d ? ::readdir(d) : nullptr) {
    const std::string name = e->d_name;
    struct stat st {};
    if ((name == "log" || name == "index" || name.starts_with("tail-")) && ::stat((dir + "/" + name).c_str(), &st) == 0)
      total += static_cast<std::uint64_t>(st.st_size);
  }
  if (d) ::closedir(d);
  return total;
}

/// A request, and the whole output its command makes (restart lines included).
struct RestartedOutput {
  sup::StartSpec spec;
  std::string whole;
};

class LogLimitTest : public SupervisorTest {
 protected:
  /// A command run `runs` times under the restart policy, each run printing
  /// 299 digits and a newline; the restart lines as the monitor writes them.
  RestartedOutput restarted(int runs) const {
    RestartedOutput o{shell("printf '%0299d\\n' 7"), {}};
    o.spec.restart = sup::RestartPolicy::always;
    o.spec.restart_delay_sec = 0.05;
    o.spec.max_restarts = runs - 1;
    const std::string run = std::string(298, '0') + "7\n";
    double delay = 0.05;
    for (int i = 0; i < runs; ++i) {
      o.whole += run;
      if (i + 1 == runs) break;
      char line[128];
      std::snprintf(line, sizeof line, "[sbxfs: exited with code 0; restart %d of %d in %.3g s]\n", i + 1, runs - 1, delay);
      o.whole += line;
      delay *= 2;
    }
    return o;
  }
  void SetUp() override {
    log_max_ = kCap;
    SupervisorTest::SetUp();
  }
};

TEST_F(LogLimitTest, KeepsTheHeadAndTheLatestOutputAndCountsWhatIsGone) {
  // 300 000 bytes through a pipe that holds 64 KiB: the command only ends
  // if the monitor keeps draining past the cap. The E once they are all
  // read: which of two pipes was written first is not known to the
  // monitor, so an E written while stdout still waited in its pipe could
  // be read before the rest of it.
  sup::StartSpec spec = shell("head -c 300000 /dev/zero | tr '\\0' a; read go; printf E >&2");
  spec.stdin_pipe = true;
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_until(
      [&] {
        sup::LogIndex idx;
        return idx.open(record_dir(r->bg_id)) == 0 && idx.stream_size(sup::LogStream::out) == 300000;
      },
      20000ms));
  SBX_ASSERT_OK(sup_->write_stdin(r->bg_id, "\n"));
  auto st = wait_ended(r->bg_id, 20000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  const std::string dir = record_dir(r->bg_id);
  const std::uint64_t kept = kept_in_tail(dir);
  EXPECT_GE(kept, kCap / 4);
  EXPECT_LE(kept, kCap / 2);
  EXPECT_TRUE(st->truncated);
  EXPECT_EQ(st->dropped_bytes, 300001 - kCap / 2 - kept);
  EXPECT_EQ(read_file(st->log_file), std::string(kCap / 2, 'a')) << "the head stays in log";
  // The E is among the last bytes.
  const std::string all = view(dir, LogSelection::all), head = std::string(kCap / 2, 'a') + marker(false);
  ASSERT_TRUE(all.starts_with(head)) << all.substr(0, 600);
  std::string tail = all.substr(head.size());
  EXPECT_EQ(tail.size(), kept);
  EXPECT_EQ(std::count(tail.begin(), tail.end(), 'E'), 1) << tail;
  EXPECT_EQ(std::count(tail.begin(), tail.end(), 'a'), static_cast<std::ptrdiff_t>(kept - 1)) << tail;
  EXPECT_EQ(view(dir, LogSelection::out), head + std::string(kept - 1, 'a'));
  EXPECT_EQ(view(dir, LogSelection::err), "E") << "stderr lost nothing: no marker in it";
  EXPECT_LE(log_files_size(dir), kCap + 4 * 1024) << "about log_max on disk";
  const nlohmann::json j = st->to_json();
  EXPECT_EQ(j.value("truncated", false), true) << j.dump();
  EXPECT_EQ(j.value("droppedBytes", 0u), st->dropped_bytes) << j.dump();
}

TEST_F(LogLimitTest, TheEndDrainsAFullPipeWhateverTheReadCap) {
  // A small log_max reads 125 bytes at a time; at the end the monitor
  // finds 600 kB waiting in the (grown) pipe: all of it is read, so the
  // tail holds what the command printed last.
  TempDir gate("sbx-gate");
  const std::string go = gate.path() + "/go";
  auto r = sup_->start(shell("head -c 300 /dev/zero | tr '\\0' b; while [ ! -e " + go +
                             " ]; do sleep 0.01; done; head -c 600000 /dev/zero | tr '\\0' a; echo END"));
  SBX_ASSERT_OK(r);
  const std::string dir = record_dir(r->bg_id);
  ASSERT_TRUE(wait_until(
      [&] {
        sup::LogIndex idx;
        return idx.open(dir) == 0 && idx.stream_size(sup::LogStream::out) == 300;
      },
      10000ms));
  const pid_t monitor = nlohmann::json::parse(read_file(dir + "/monitor.json"))["monitorPid"].get<pid_t>();
  ASSERT_EQ(::kill(monitor, SIGSTOP), 0);
  struct Cont {
    pid_t pid;
    ~Cont() { ::kill(pid, SIGCONT); }
  } cont{monitor};
  write_file(go, "");
  // The command has written it all and exited (a zombie: its monitor is stopped).
  ASSERT_TRUE(wait_until([&] { return sup::process_is_zombie(r->pid); }, 20000ms));
  ASSERT_EQ(::kill(monitor, SIGCONT), 0);
  auto st = wait_ended(r->bg_id, 20000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  const std::string out = view(dir, LogSelection::out);
  EXPECT_TRUE(out.ends_with("aaaaEND\n")) << out.substr(out.size() > 100 ? out.size() - 100 : 0);
  EXPECT_EQ(st->dropped_bytes, 600304 - kCap / 2 - kept_in_tail(dir));
}

TEST_F(LogLimitTest, ExactlyTheCapIsNotTruncated) {
  auto r = sup_->start(shell("head -c 1000 /dev/zero"));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->truncated);
  EXPECT_EQ(st->dropped_bytes, 0u);
  EXPECT_EQ(view(record_dir(r->bg_id), LogSelection::all), std::string(kCap, '\0')) << "head and tail, no gap";
  EXPECT_FALSE(file_exists(record_dir(r->bg_id) + "/dropped"));
  EXPECT_EQ(st->to_json().value("truncated", true), false);
}

TEST_F(LogLimitTest, TruncationShowsWhileRunningAndAfterARestart) {
  auto r = sup_->start(shell("printf 'line\\n'; head -c 5000 /dev/zero; exec sleep 30"));
  SBX_ASSERT_OK(r);
  const std::string id = r->bg_id;
  const std::string dir = record_dir(id);
  auto dropped = [&] {
    auto st = sup_->status(id);
    // All 5005 bytes are in: what is kept after the head, and what is gone.
    sup::LogIndex idx;
    return st && st->running && st->truncated && idx.open(dir) == 0 && idx.size(LogSelection::all) == 5005 &&
           st->dropped_bytes == 5005 - kCap / 2 - kept_in_tail(dir);
  };
  ASSERT_TRUE(wait_until(dropped, 5000ms)) << "a running command's status shows what was dropped";
  EXPECT_EQ(read_file(dir + "/log"), "line\n" + std::string(kCap / 2 - 5, '\0'));

  reopen();
  ASSERT_TRUE(wait_until(dropped, 5000ms)) << "and so does the next supervisor's";
  SBX_ASSERT_OK(sup_->stop(id));
  auto st = wait_ended(id, 10000ms);
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->truncated);
  EXPECT_EQ(st->dropped_bytes, 5005 - kCap / 2 - kept_in_tail(dir));
}

TEST_F(LogLimitTest, FiftyTimesTheCapStaysBoundedOnDisk) {
  // Many small reads too: the index is capped with its bytes.
  auto r = sup_->start(shell("i=0; while [ $i -lt 5000 ]; do echo \"line $i\"; i=$((i+1)); done"));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 30000ms);
  ASSERT_TRUE(st);
  const std::string dir = record_dir(r->bg_id);
  EXPECT_TRUE(st->truncated);
  // Each part's index holds at most entry_cap() entries.
  const std::uint64_t indexes = sup::kIndexHeaderSize + sup::kIndexEntrySize * (sup::entry_cap(kCap / 2) + 1) +
                                2 * (sup::kTailHeaderSize + sup::kIndexEntrySize * sup::entry_cap(kCap / 4));
  EXPECT_LE(log_files_size(dir), kCap + indexes);
  const std::string v = view(dir, LogSelection::all);
  EXPECT_TRUE(v.starts_with("line 0\nline 1\n")) << v.substr(0, 100);
  EXPECT_TRUE(v.ends_with("line 4998\nline 4999\n")) << v.substr(v.size() > 100 ? v.size() - 100 : 0);
  EXPECT_NE(v.find(sup::log_marker_line(kCap)), std::string::npos);
}

TEST_F(LogLimitTest, RestartLinesBeforeTheTailAreCountedOnce) {
  // 2 runs: 600 bytes and a restart line in the head, the rest in the
  // first segment; nothing is dropped, so no log_max marker anywhere.
  const RestartedOutput o = restarted(2);
  ASSERT_GT(o.whole.size(), kCap / 2);
  ASSERT_LE(o.whole.size(), kCap);
  auto r = sup_->start(o.spec);
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 20000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->restarts, 1u);
  EXPECT_FALSE(st->truncated);
  const std::string dir = record_dir(r->bg_id);
  EXPECT_EQ(view(dir, LogSelection::all), o.whole);
  EXPECT_EQ(view(dir, LogSelection::out), o.whole) << "restart lines are in both streams";
  sup::LogIndex idx;
  ASSERT_EQ(idx.open(dir), 0);
  EXPECT_EQ(idx.size(LogSelection::all), o.whole.size());
  EXPECT_EQ(idx.kept_start(LogSelection::all), kCap / 2) << "the tail begins where the head ends";
}

TEST_F(LogLimitTest, DroppedBytesPastRestartLinesAreExact) {
  const RestartedOutput o = restarted(5);
  ASSERT_GT(o.whole.size(), kCap + kCap / 4);
  auto r = sup_->start(o.spec);
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id, 20000ms);
  ASSERT_TRUE(st);
  const std::string dir = record_dir(r->bg_id);
  const std::uint64_t kept = kept_in_tail(dir);
  EXPECT_TRUE(st->truncated);
  EXPECT_EQ(st->dropped_bytes, o.whole.size() - kCap / 2 - kept);
  EXPECT_EQ(view(dir, LogSelection::all),
            o.whole.substr(0, kCap / 2) + marker(o.whole[kCap / 2 - 1] == '\n') + o.whole.substr(o.whole.size() - kept));
}

}  // namespace
