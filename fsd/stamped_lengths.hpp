#pragma once
// The lengths of the timestamped log views asked for by name. stat(2) and
// fstat(2) reach the daemon without the reader's open file, so the length
// of `log,timestamps` (known only by making the text) is counted by a
// handle kept here for that view, on from where it was: `tail -f` polling
// a long log costs its new output each time, not the whole log. The last
// few views asked for are kept (each holds its log's files open).
//
// Thread-safe.
#include <sys/stat.h>

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "fsd/handle.hpp"

namespace fsd {

class StampedLengths {
 public:
  using Make = std::function<std::unique_ptr<Handle>()>;

  /// stat of view `key` (its folder, selection and run): the kept handle's
  /// fstat, the handle made by `make` the first time.
  bool attr(const std::string& key, const Make& make, struct stat* out) {
    std::shared_ptr<Handle> h;
    {
      std::lock_guard g(mu_);
      for (auto it = kept_.begin(); it != kept_.end(); ++it)
        if (it->first == key) {
          h = it->second;
          kept_.erase(it);
          break;
        }
      if (!h) h = make();
      kept_.emplace_front(key, h);
      if (kept_.size() > kKept) kept_.pop_back();
    }
    return h->fstat(out);
  }

  /// Drops every kept handle (at shutdown, while what they use is there).
  void clear() {
    std::lock_guard g(mu_);
    kept_.clear();
  }

 private:
  static constexpr std::size_t kKept = 16;
  std::mutex mu_;
  std::deque<std::pair<std::string, std::shared_ptr<Handle>>> kept_;  // guarded by mu_; the latest first
};

}  // namespace fsd
