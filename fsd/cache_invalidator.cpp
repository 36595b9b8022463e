#include "fsd/cache_invalidator.hpp"

#include <pthread.h>

namespace fsd {

void CacheInvalidator::start(fuse_session* se) {
  std::lock_guard g(mu_);
  if (se_ || stop_) return;
  se_ = se;
  worker_ = std::thread([this] { run(); });
}

void CacheInvalidator::stop() {
  std::deque<std::pair<std::uint64_t, std::function<void()>>> after;
  {
    std::lock_guard g(mu_);
    stop_ = true;
    queue_.clear();
    queued_.clear();
    inodes_.clear();
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  {
    std::lock_guard g(mu_);
    drops_sent_ = drops_asked_;
    after.swap(after_);
  }
  for (auto& [mark, then] : after) then();  // nothing is sent any more: nothing to wait for
}

void CacheInvalidator::schedule(fuse_ino_t parent, std::string name) {
  {
    std::lock_guard g(mu_);
    if (!se_ || stop_) return;
    if (!queued_.emplace(parent, name).second) return;
    const bool was_empty = queue_.empty();
    queue_.push_back(Due{std::chrono::steady_clock::now() + linger_, parent, std::move(name)});
    if (!was_empty) return;  // the thread wakes for the earlier one first
  }
  cv_.notify_one();
}

void CacheInvalidator::drop_inode(fuse_ino_t ino) {
  {
    std::lock_guard g(mu_);
    if (!se_ || stop_) return;
    inodes_.push_back(ino);
    ++drops_asked_;
  }
  cv_.notify_one();
}

void CacheInvalidator::after_drops(std::function<void()> then) {
  {
    std::lock_guard g(mu_);
    if (drops_sent_ < drops_asked_) {
      after_.emplace_back(drops_asked_, std::move(then));
      return;
    }
  }
  then();
}

std::size_t CacheInvalidator::queued() const {
  std::lock_guard g(mu_);
  return queue_.size() + inodes_.size();
}

void CacheInvalidator::run() {
  pthread_setname_np(pthread_self(), "sbx-inval");
  std::unique_lock g(mu_);
  for (;;) {
    cv_.wait(g, [&] { return stop_ || !queue_.empty() || !inodes_.empty(); });
    if (stop_) return;
    fuse_session* se = se_;
    if (!inodes_.empty()) {
      const fuse_ino_t ino = inodes_.front();
      inodes_.pop_front();
      g.unlock();
      // Offset 0, length 0: every page, and the attributes. -ENOENT when
      // the kernel keeps nothing of it: nothing to do.
      (void)fuse_lowlevel_notify_inval_inode(se, ino, 0, 0);
      g.lock();
      ++drops_sent_;
      std::deque<std::function<void()>> due;
      while (!after_.empty() && after_.front().first <= drops_sent_) {
        due.push_back(std::move(after_.front().second));
        after_.pop_front();
      }
      if (due.empty()) continue;
      g.unlock();
      for (auto& then : due) then();
      g.lock();
      continue;
    }
    if (cv_.wait_until(g, queue_.front().at, [&] { return stop_ || !inodes_.empty(); })) {
      if (stop_) return;
      continue;  // an inode first
    }
    Due d = std::move(queue_.front());
    queue_.pop_front();
    queued_.erase({d.parent, d.name});
    g.unlock();
    // -ENOENT when the kernel has no such name (any more): nothing to do.
    (void)fuse_lowlevel_notify_inval_entry(se, d.parent, d.name.c_str(), d.name.size());
    g.lock();
  }
}

}  // namespace fsd
