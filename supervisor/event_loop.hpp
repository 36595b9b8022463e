#pragma once
// One thread that owns every wake-up of the supervisor: fds that become
// readable (monitor pidfds, inotify), one-shot timers, and posted tasks.
// It sleeps in epoll_wait when nothing happens: an idle loop uses no CPU.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "supervisor/unique_fd.hpp"

namespace sup {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using Task = std::function<void()>;

  EventLoop();   ///< starts the thread
  ~EventLoop();  ///< stop()
  /// Stops and joins the thread; pending timers and tasks are dropped. Once
  /// it returns no callback runs. Not from the loop thread.
  void stop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  void post(Task t);
  std::uint64_t add_timer(Clock::time_point when, Task t);
  bool cancel_timer(std::uint64_t id);
  /// Calls `on_ready` on the loop thread each time `fd` is readable (or
  /// writable, with `want_write`), until unwatch(fd). The caller keeps owning fd.
  void watch(int fd, Task on_ready, bool want_write = false);
  void unwatch(int fd);
  bool on_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void run();
  void wake();
  void rearm_timer();  // needs mu_

  UniqueFd epoll_, wake_fd_, timer_fd_;
  std::mutex mu_;
  bool stopping_ = false;                       // guarded by mu_
  std::vector<Task> posted_;                    // guarded by mu_
  std::map<int, std::shared_ptr<Task>> watched_;  // guarded by mu_
  struct Timer { Clock::time_point when; Task task; };
  std::map<std::uint64_t, Timer> timers_;       // guarded by mu_
  std::multimap<Clock::time_point, std::uint64_t> timer_order_;  // guarded by mu_
  // What timer_fd_ is set to (max: nothing); guarded by mu_. A round of the
  // loop that leaves the first timer as it was costs no timerfd_settime.
  Clock::time_point armed_ = Clock::time_point::max();
  std::uint64_t next_timer_ = 1;                // guarded by mu_
  std::thread thread_;
};

}  // namespace sup
