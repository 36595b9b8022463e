#pragma once
// A few named threads ("sbx-work") for slow work that must not delay the
// supervisor's event thread: removing record folders, scanning /proc,
// building big answers. Tasks run in the order posted (on one thread; in
// parallel on several).
//
// Thread-safe. Destruction runs what is still queued, then joins.
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace sup {

class WorkPool {
 public:
  using Task = std::function<void()>;

  explicit WorkPool(unsigned threads);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  void post(Task t);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;  // guarded by mu_
  bool stopping_ = false;   // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace sup
