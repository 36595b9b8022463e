#pragma once
// Tells the kernel to drop what it keeps of the tree:
// - names, soon after their lookup: the names with parameters
//   (`wait,timeoutSec=N`) are open-ended, and the kernel keeps a dentry and
//   an inode for each name looked up until memory runs short, and with them
//   an entry of ParamNodes each. Dropping a name changes nothing for whoever
//   uses it: an open file keeps its inode, and the next lookup of the name
//   finds the same entry while it lives. Once the kernel has let go of the
//   inode it sends FORGET, and the entry goes.
// - an inode's pages and attributes, at once: an ended command's output,
//   which the kernel may cache (ended_output_cache.hpp), when its named slot
//   runs again or the record is removed.
//
// Its own thread ("sbx-inval") sends the notifications: the kernel answers
// one only after taking the directory's lock (a name) or the pages' locks (an
// inode), which a lookup or a read in progress holds until a handler answers,
// so a handler (or a thread under a lock a handler needs) must never send
// one. The thread sleeps while nothing is due.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <fuse_lowlevel.h>

namespace fsd {

class CacheInvalidator {
 public:
  /// Names are dropped `linger` after they were scheduled.
  explicit CacheInvalidator(std::chrono::milliseconds linger) : linger_(linger) {}
  ~CacheInvalidator() { stop(); }
  CacheInvalidator(const CacheInvalidator&) = delete;
  CacheInvalidator& operator=(const CacheInvalidator&) = delete;

  /// Starts the thread, for session `se` (mounted). Before it, schedule() does nothing.
  void start(fuse_session* se);
  /// Stops and joins the thread (what is still queued is dropped). Call
  /// before the session is destroyed.
  void stop();
  /// Drops `name` in directory `parent` from the kernel's caches soon. A
  /// name already queued is not queued twice. Any thread; never blocks.
  void schedule(fuse_ino_t parent, std::string name);
  /// Drops the cached pages and attributes of inode `ino` now (before any
  /// name that is due). Any thread; never blocks.
  void drop_inode(fuse_ino_t ino);
  /// Runs `then` once every inode drop asked before this call has reached
  /// the kernel: at once, on this thread, when none is pending; else on
  /// the thread, after the last of them (or at stop()). Any thread; never
  /// blocks. An answer that must not be overtaken by old pages goes so.
  void after_drops(std::function<void()> then);
  /// Names and inodes queued now (tests and status).
  std::size_t queued() const;

 private:
  struct Due {
    std::chrono::steady_clock::time_point at;
    fuse_ino_t parent;
    std::string name;
  };
  void run();

  const std::chrono::milliseconds linger_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  fuse_session* se_ = nullptr;                          // guarded by mu_
  bool stop_ = false;                                   // guarded by mu_
  std::deque<Due> queue_;                               // guarded by mu_; due times in order
  std::set<std::pair<fuse_ino_t, std::string>> queued_;  // guarded by mu_
  std::deque<fuse_ino_t> inodes_;                       // guarded by mu_; due now
  std::uint64_t drops_asked_ = 0;                       // guarded by mu_; inodes queued so far
  std::uint64_t drops_sent_ = 0;                        // guarded by mu_; of them, sent (or given up)
  std::deque<std::pair<std::uint64_t, std::function<void()>>> after_;  // guarded by mu_; by drops_asked_
  std::thread worker_;
};

}  // namespace fsd
