#include "fsd/open_handles.hpp"

#include <utility>
#include <vector>

#include "fsd/opener_process.hpp"

namespace fsd {

std::uint64_t OpenHandles::keep(std::unique_ptr<Handle> h, std::uint64_t ino, uid_t uid, pid_t tid) {
  const auto fh = reinterpret_cast<std::uint64_t>(h.get());
  std::lock_guard g(mu_);
  open_.emplace(fh, Open{std::move(h), ino, uid, tid});
  fhs_.emplace(ino, fh);
  return fh;
}

std::shared_ptr<Handle> OpenHandles::use(std::uint64_t fh) {
  std::lock_guard g(mu_);
  const auto it = open_.find(fh);
  return it == open_.end() ? nullptr : it->second.handle;
}

std::shared_ptr<Handle> OpenHandles::any_on(std::uint64_t ino, uid_t uid) {
  std::lock_guard g(mu_);
  for (auto [a, b] = fhs_.equal_range(ino); a != b; ++a)
    if (const Open& o = open_.at(a->second); uid == 0 || o.uid == uid) return o.handle;
  return nullptr;
}

std::shared_ptr<Handle> OpenHandles::opened_by(std::uint64_t ino, pid_t tid) {
  // Few files are open by anyone at a stat: usually none is looked at. The
  // thread that opened it (tail's only one) first; else by process, for
  // the first few (/proc is read for each).
  constexpr std::size_t kLooked = 16;
  std::vector<std::pair<pid_t, std::shared_ptr<Handle>>> others;
  {
    std::lock_guard g(mu_);
    for (auto [a, b] = fhs_.equal_range(ino); a != b; ++a) {
      const Open& o = open_.at(a->second);
      if (o.tid == tid && tid > 0) return o.handle;
      if (others.size() < kLooked && o.tid > 0) others.emplace_back(o.tid, o.handle);
    }
  }
  if (others.empty()) return nullptr;
  const pid_t process = process_of_thread(tid);
  if (process == 0) return nullptr;
  for (auto& [t, h] : others)
    if (process_of_thread(t) == process) return std::move(h);
  return nullptr;
}

void OpenHandles::drop(std::uint64_t fh) {
  std::shared_ptr<Handle> gone;  // destroyed outside the lock
  std::lock_guard g(mu_);
  if (auto it = open_.find(fh); it != open_.end()) {
    for (auto [a, b] = fhs_.equal_range(it->second.ino); a != b; ++a)
      if (a->second == fh) {
        fhs_.erase(a);
        break;
      }
    gone = std::move(it->second.handle);
    open_.erase(it);
  }
}

void OpenHandles::clear() {
  std::unordered_map<std::uint64_t, Open> gone;
  {
    std::lock_guard g(mu_);
    gone.swap(open_);
    fhs_.clear();
  }
}

}  // namespace fsd
