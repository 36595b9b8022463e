// The supervisor's event thread only dispatches: big answers (procs/ID/output)
// are built elsewhere, so a waiter whose command ends with many of them is
// answered first, and every answer is whole.
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "../../supervisor/unique_fd.hpp"
#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using EventThreadTest = SbxfsTest;

TEST_F(EventThreadTest, AWaiterIsAnsweredBeforeManyBigOutputAnswersBuiltAtTheSameMoment) {
  constexpr int kBig = 20;
  constexpr int kBytes = 512 * 1024;
  // Every command ends when the test lets go of its lock on `gate`, once
  // all reads are blocked in the daemon; the waiter's a little after.
  const std::string gate = dir_ + "/gate";
  const sup::UniqueFd gate_fd(::open(gate.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644));
  ASSERT_TRUE(gate_fd);
  ASSERT_EQ(::flock(gate_fd.get(), LOCK_EX), 0);
  const std::string until_gate = "flock -s '" + gate + "' true";
  std::vector<std::string> big;
  for (int i = 0; i < kBig; ++i) {
    big.push_back(start("head -c " + std::to_string(kBytes) + " /dev/zero | tr '\\000' a; " + until_gate));
    ASSERT_FALSE(big.back().empty());
  }
  const std::string waiter = start(until_gate + "; " + python_path() + " -c 'import time; time.sleep(0.03)'");
  ASSERT_FALSE(waiter.empty());

  std::atomic<int> whole{0};
  std::vector<Clock::time_point> done(kBig);
  std::vector<std::atomic<pid_t>> tids(kBig + 1);
  std::vector<std::thread> readers;
  for (int i = 0; i < kBig; ++i)
    readers.emplace_back([&, i] {
      tids[i] = static_cast<pid_t>(::syscall(SYS_gettid));
      const FileResult r = read_file(p("procs/" + big[i] + "/output"));
      done[i] = Clock::now();
      const json j = parse_json(r.data);
      if (r.err == 0 && j.is_object() && j["stdout"] == std::string(kBytes, 'a') && j["exitCode"] == 0) ++whole;
    });
  FileResult w;
  Clock::time_point waiter_done;
  readers.emplace_back([&] {
    tids[kBig] = static_cast<pid_t>(::syscall(SYS_gettid));
    w = read_file(p("procs/" + waiter + "/wait"));
    waiter_done = Clock::now();
  });
  auto all_blocked = [&] {
    for (const std::atomic<pid_t>& tid : tids) {
      const FileResult r = read_file("/proc/self/task/" + std::to_string(tid.load()) + "/syscall");
      if (tid.load() == 0 || r.err != 0 || r.data.rfind(std::to_string(SYS_read) + " ", 0) != 0) return false;
    }
    return true;
  };
  const bool blocked = wait_until(all_blocked, 20s);
  const Clock::time_point released = Clock::now();
  ASSERT_EQ(::flock(gate_fd.get(), LOCK_UN), 0);
  for (std::thread& t : readers) t.join();
  ASSERT_TRUE(blocked) << "the reads did not all reach the daemon";

  ASSERT_EQ(w.err, 0);
  EXPECT_EQ(parse_json(w.data)["stillRunning"], false) << w.data;
  EXPECT_EQ(whole.load(), kBig);
  // Built on the event thread, every big answer would come before the
  // waiter's (its command ended last); built elsewhere, most come after.
  const auto before = std::count_if(done.begin(), done.end(), [&](Clock::time_point t) { return t < waiter_done; });
  EXPECT_LT(before, kBig / 2) << "the waiter was answered "
                              << std::chrono::duration<double>(waiter_done - released).count()
                              << " s after the gate opened, after " << before << " of the " << kBig << " big answers";
}

}  // namespace
}  // namespace sbxit
