#pragma once
// One daemon at a time between "nothing live is mounted here" and its own
// mount: two started at once would both find the mount point free and both
// mount (the lower one then hidden, its records out of reach). The lock is
// flock(2) on the mount point's directory, held from before the check until
// the mount is made; a daemon that takes it after another mounted there
// opens that mount's root instead, and its check then finds the live sbxfs.
#include <chrono>
#include <string>

#include "supervisor/error.hpp"
#include "supervisor/unique_fd.hpp"

namespace fsd {

class MountPointLock {
 public:
  /// Waits up to `wait` for another starting daemon to mount (or fail);
  /// busy when it holds on. `mountpoint` must exist.
  static sup::Result<MountPointLock> take(const std::string& mountpoint, std::chrono::milliseconds wait);

  /// Lets go (after the mount, or when the start fails).
  void release() { fd_.reset(); }

 private:
  explicit MountPointLock(sup::UniqueFd fd) : fd_(std::move(fd)) {}
  sup::UniqueFd fd_;
};

}  // namespace fsd
