#pragma once
// One daemon at a time between "nothing live is mounted here" and its own
// mount: two started at once would both find the mount point free and both
// mount (the lower one then hidden, its records out of reach). The lock is
// flock(2) on the folder that holds the mount point (the mount point itself
// cannot be opened while a dead daemon's mount is on it, and that mount
// stays until the new one is made; where its user may not read that
// folder, the mount point), held from before the check until the
// mount is made; a daemon that takes it after another mounted there finds
// the live sbxfs in its check.
#include <chrono>
#include <string>

#include "supervisor/error.hpp"
#include "supervisor/unique_fd.hpp"

namespace fsd {

class MountPointLock {
 public:
  /// Waits up to `wait` for another starting daemon to mount (or fail);
  /// busy when it holds on. `mountpoint` (absolute) must exist.
  static sup::Result<MountPointLock> take(const std::string& mountpoint, std::chrono::milliseconds wait);

  /// Lets go (after the mount, or when the start fails).
  void release() { fd_.reset(); }

 private:
  explicit MountPointLock(sup::UniqueFd fd) : fd_(std::move(fd)) {}
  sup::UniqueFd fd_;
};

}  // namespace fsd
