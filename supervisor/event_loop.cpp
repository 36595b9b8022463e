#include "supervisor/event_loop.hpp"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace sup {

EventLoop::EventLoop()
    : epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      timer_fd_(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) {
  if (!epoll_ || !wake_fd_ || !timer_fd_)
    throw std::runtime_error(std::string("event loop: ") + std::strerror(errno));
  for (int fd : {wake_fd_.get(), timer_fd_.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
  }
  thread_ = std::thread([this] { run(); });
  ::pthread_setname_np(thread_.native_handle(), "sbx-events");
}

EventLoop::~EventLoop() { stop(); }

void EventLoop::stop() {
  {
    std::lock_guard g(mu_);
    stopping_ = true;
  }
  wake();
  if (thread_.joinable()) thread_.join();
}

void EventLoop::wake() {
  std::uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_.get(), &one, sizeof one);
}

void EventLoop::post(Task t) {
  {
    std::lock_guard g(mu_);
    posted_.push_back(std::move(t));
  }
  // From the loop itself: the round's end looks at posted_ before it sleeps.
  if (!on_loop_thread()) wake();
}

std::uint64_t EventLoop::add_timer(Clock::time_point when, Task t) {
  std::lock_guard g(mu_);
  std::uint64_t id = next_timer_++;
  timers_.emplace(id, Timer{when, std::move(t)});
  timer_order_.emplace(when, id);
  if (!on_loop_thread()) rearm_timer();  // else at the round's end, once for all of its changes
  return id;
}

bool EventLoop::cancel_timer(std::uint64_t id) {
  std::lock_guard g(mu_);
  auto it = timers_.find(id);
  if (it == timers_.end()) return false;
  auto range = timer_order_.equal_range(it->second.when);
  for (auto o = range.first; o != range.second; ++o)
    if (o->second == id) { timer_order_.erase(o); break; }
  timers_.erase(it);
  if (!on_loop_thread()) rearm_timer();
  return true;
}

void EventLoop::rearm_timer() {
  const Clock::time_point want = timer_order_.empty() ? Clock::time_point::max() : timer_order_.begin()->first;
  if (want == armed_) return;
  armed_ = want;
  itimerspec its{};
  if (!timer_order_.empty()) {
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  timer_order_.begin()->first.time_since_epoch()).count();
    if (ns <= 0) ns = 1;
    its.it_value.tv_sec = ns / 1000000000;
    its.it_value.tv_nsec = ns % 1000000000;
  }
  // steady_clock is CLOCK_MONOTONIC on Linux, so absolute times line up.
  ::timerfd_settime(timer_fd_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
}

void EventLoop::watch(int fd, Task on_ready, bool want_write) {
  {
    std::lock_guard g(mu_);
    watched_[fd] = std::make_shared<Task>(std::move(on_ready));
  }
  epoll_event ev{};
  ev.events = want_write ? EPOLLOUT : EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
}

void EventLoop::unwatch(int fd) {
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  std::lock_guard g(mu_);
  watched_.erase(fd);
}

void EventLoop::run() {
  epoll_event evs[64];
  bool more = false;  // tasks posted by the last round: do not sleep
  for (;;) {
    int n = ::epoll_wait(epoll_.get(), evs, 64, more ? 0 : -1);
    if (n < 0 && errno != EINTR) return;
    std::vector<Task> due;
    std::vector<std::shared_ptr<Task>> ready;
    {
      std::lock_guard g(mu_);
      if (stopping_) return;
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        if (fd == wake_fd_.get()) {
          std::uint64_t v;
          [[maybe_unused]] auto r = ::read(fd, &v, sizeof v);
        } else if (fd == timer_fd_.get()) {
          std::uint64_t v;
          [[maybe_unused]] auto r = ::read(fd, &v, sizeof v);
          armed_ = Clock::time_point::max();  // it went off: nothing is set
        } else if (auto it = watched_.find(fd); it != watched_.end()) {
          ready.push_back(it->second);
        }
      }
      due.swap(posted_);
      auto now = Clock::now();
      // Timers after posted tasks, before fds (see below).
      while (!timer_order_.empty() && timer_order_.begin()->first <= now) {
        auto id = timer_order_.begin()->second;
        timer_order_.erase(timer_order_.begin());
        auto it = timers_.find(id);
        due.push_back(std::move(it->second.task));
        timers_.erase(it);
      }
    }
    // Posted tasks first: they were queued before whatever the fds report
    // in this round (a start's "started" before its monitor's exit).
    for (auto& t : due) t();
    for (auto& t : ready) (*t)();
    std::lock_guard g(mu_);
    rearm_timer();  // the timers this round's callbacks added or cancelled
    more = !posted_.empty();
  }
}

}  // namespace sup
