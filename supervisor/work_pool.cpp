#include "supervisor/work_pool.hpp"

#include <pthread.h>

#include <algorithm>

namespace sup {

WorkPool::WorkPool(unsigned threads) {
  for (unsigned i = 0; i < std::max(1u, threads); ++i) {
    threads_.emplace_back([this] { run(); });
    ::pthread_setname_np(threads_.back().native_handle(), "sbx-work");
  }
}

WorkPool::~WorkPool() {
  {
    std::lock_guard g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkPool::post(Task t) {
  {
    std::lock_guard g(mu_);
    queue_.push_back(std::move(t));
  }
  cv_.notify_one();
}

void WorkPool::run() {
  for (;;) {
    Task t;
    {
      std::unique_lock g(mu_);
      cv_.wait(g, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      t = std::move(queue_.front());
      queue_.pop_front();
    }
    t();
  }
}

}  // namespace sup
