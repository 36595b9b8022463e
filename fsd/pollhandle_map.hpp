#pragma once
// The pollhandles of open files, kept until what they wait for happens: a
// map from the open file (owner) to a record holding `ph`, guarded by the
// caller's mutex. Shared by ParkedRequests and FollowRequests.
#include <mutex>
#include <utility>

#include <fuse_lowlevel.h>

namespace fsd {

/// Takes `owner`'s pollhandle out of `watches` (under `mu`); when `only` is
/// given, only if it is still that one. Null when there is none (the event
/// thread took it, or it was replaced). The caller destroys what it gets.
template <class Map>
fuse_pollhandle* take_pollhandle(std::mutex& mu, Map& watches, const void* owner, fuse_pollhandle* only = nullptr) {
  std::lock_guard g(mu);
  auto it = watches.find(owner);
  if (it == watches.end() || (only && it->second.ph != only)) return nullptr;
  fuse_pollhandle* ph = it->second.ph;
  watches.erase(it);
  return ph;
}

/// Stores `w` (its `ph`) as `owner`'s, destroying the one it replaces.
/// False when `closed` (under `mu`) says no more are kept: w.ph is destroyed.
template <class Map, class Watch>
bool put_pollhandle(std::mutex& mu, const bool& closed, Map& watches, const void* owner, Watch w) {
  fuse_pollhandle* old = nullptr;
  bool kept = false;
  {
    std::lock_guard g(mu);
    kept = !closed;
    if (!kept) {
      old = w.ph;
    } else {
      Watch& slot = watches[owner];
      old = slot.ph;
      slot = std::move(w);
    }
  }
  if (old) fuse_pollhandle_destroy(old);
  return kept;
}

}  // namespace fsd
