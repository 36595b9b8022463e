#include "fsd/open_handles.hpp"

#include <utility>

namespace fsd {

std::uint64_t OpenHandles::keep(std::unique_ptr<Handle> h) {
  const auto fh = reinterpret_cast<std::uint64_t>(h.get());
  std::lock_guard g(mu_);
  open_.emplace(fh, std::move(h));
  return fh;
}

std::shared_ptr<Handle> OpenHandles::use(std::uint64_t fh) {
  std::lock_guard g(mu_);
  const auto it = open_.find(fh);
  return it == open_.end() ? nullptr : it->second;
}

void OpenHandles::drop(std::uint64_t fh) {
  std::shared_ptr<Handle> gone;  // destroyed outside the lock
  std::lock_guard g(mu_);
  if (auto it = open_.find(fh); it != open_.end()) {
    gone = std::move(it->second);
    open_.erase(it);
  }
}

void OpenHandles::clear() {
  std::unordered_map<std::uint64_t, std::shared_ptr<Handle>> gone;
  {
    std::lock_guard g(mu_);
    gone.swap(open_);
  }
}

}  // namespace fsd
