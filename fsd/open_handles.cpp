#include "fsd/open_handles.hpp"

#include <utility>
#include <vector>

#include "fsd/opener_process.hpp"

namespace fsd {

std::uint64_t OpenHandles::keep(std::unique_ptr<Handle> h, std::uint64_t ino, uid_t uid, pid_t tid) {
  const auto fh = reinterpret_cast<std::uint64_t>(h.get());
  std::lock_guard g(mu_);
  open_.emplace(fh, Open{std::move(h), ino, uid, tid, 0});
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
  // thread that opened it (tail's only one) first; else by process (a
  // thread of a pool may ask), each opener's read from /proc once.
  std::vector<std::pair<std::uint64_t, pid_t>> unknown;  // fh, opener's thread
  {
    std::lock_guard g(mu_);
    bool any = false;
    for (auto [a, b] = fhs_.equal_range(ino); a != b; ++a) {
      const Open& o = open_.at(a->second);
      if (o.tid == tid && tid > 0) return o.handle;
      any = true;
      if (o.process == 0 && o.tid > 0) unknown.emplace_back(a->second, o.tid);
    }
    if (!any) return nullptr;
  }
  const pid_t process = process_of_thread(tid);
  if (process == 0) return nullptr;
  std::vector<std::pair<std::uint64_t, pid_t>> learnt;
  for (const auto& [fh, t] : unknown) learnt.emplace_back(fh, process_of_thread(t));
  std::lock_guard g(mu_);
  for (const auto& [fh, p] : learnt)
    if (auto it = open_.find(fh); it != open_.end() && p > 0) it->second.process = p;
  for (auto [a, b] = fhs_.equal_range(ino); a != b; ++a)
    if (const Open& o = open_.at(a->second); o.process == process) return o.handle;
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
