// The supervisor's event thread only dispatches: big answers (procs/ID/output)
// are built elsewhere, so a waiter whose command ends with many of them is
// answered first, and every answer is whole.
#include <algorithm>
#include <atomic>
#include <thread>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using EventThreadTest = SbxfsTest;

TEST_F(EventThreadTest, AWaiterIsAnsweredBeforeManyBigOutputAnswersBuiltAtTheSameMoment) {
  constexpr int kBig = 20;
  constexpr int kBytes = 512 * 1024;
  // Every command ends at one wall-clock moment, late enough for all starts
  // and reads to be issued first; the waiter's a little after the others.
  const double end_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() + 4;
  auto until = [](double t) {
    return python_path() + " -c 'import time; time.sleep(max(0, " + std::to_string(t) + " - time.time()))'";
  };
  std::vector<std::string> big;
  for (int i = 0; i < kBig; ++i) {
    big.push_back(start("head -c " + std::to_string(kBytes) + " /dev/zero | tr '\\000' a; " + until(end_at)));
    ASSERT_FALSE(big.back().empty());
  }
  const std::string waiter = start(until(end_at + 0.03));
  ASSERT_FALSE(waiter.empty());

  std::atomic<int> whole{0};
  std::vector<Clock::time_point> done(kBig);
  std::vector<std::thread> readers;
  for (int i = 0; i < kBig; ++i)
    readers.emplace_back([&, i] {
      const FileResult r = read_file(p("procs/" + big[i] + "/output"));
      done[i] = Clock::now();
      const json j = parse_json(r.data);
      if (r.err == 0 && j.is_object() && j["stdout"] == std::string(kBytes, 'a') && j["exitCode"] == 0) ++whole;
    });
  const FileResult w = read_file(p("procs/" + waiter + "/wait"));
  const Clock::time_point waiter_done = Clock::now();
  const double late = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
                      (end_at + 0.03);
  for (std::thread& t : readers) t.join();

  ASSERT_EQ(w.err, 0);
  EXPECT_EQ(parse_json(w.data)["stillRunning"], false) << w.data;
  EXPECT_EQ(whole.load(), kBig);
  // Built on the event thread, every big answer would come before the
  // waiter's (its command ended last); built elsewhere, most come after.
  const auto before = std::count_if(done.begin(), done.end(), [&](Clock::time_point t) { return t < waiter_done; });
  EXPECT_LT(before, kBig / 2) << "the waiter was answered " << late << " s after its command ended, after " << before
                              << " of the " << kBig << " big answers";
}

}  // namespace
}  // namespace sbxit
