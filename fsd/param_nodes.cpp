#include "fsd/param_nodes.hpp"

namespace fsd {

fuse_ino_t ParamNodes::acquire(std::uint64_t serial, Kind kind, const FileParams& params) {
  std::lock_guard g(mu_);
  Key key{serial, kind, params.canonical()};
  auto it = by_key_.find(key);
  if (it == by_key_.end()) {
    const fuse_ino_t ino = kBit | next_++;
    it = by_key_.emplace(std::move(key), ino).first;
    by_ino_.emplace(ino, Slot{Entry{kind, serial, std::make_shared<const FileParams>(params)}, 0, it});
  } else if (by_ino_.at(it->second).entry.params->given() != params.given()) {
    // The same keys spelled otherwise: an open after this lookup names the file as it did.
    by_ino_.at(it->second).entry.params = std::make_shared<const FileParams>(params);
  }
  ++by_ino_.at(it->second).lookups;
  return it->second;
}

void ParamNodes::forget(fuse_ino_t ino, std::uint64_t n) {
  std::lock_guard g(mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return;
  Slot& s = it->second;
  s.lookups = n >= s.lookups ? 0 : s.lookups - n;
  if (s.lookups > 0) return;
  by_key_.erase(s.by_key);
  by_ino_.erase(it);
}

std::optional<ParamNodes::Entry> ParamNodes::find(fuse_ino_t ino) const {
  std::lock_guard g(mu_);
  auto it = by_ino_.find(ino);
  if (it == by_ino_.end()) return std::nullopt;
  return it->second.entry;
}

std::size_t ParamNodes::size() const {
  std::lock_guard g(mu_);
  return by_ino_.size();
}

}  // namespace fsd
