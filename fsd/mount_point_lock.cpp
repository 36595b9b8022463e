#include "fsd/mount_point_lock.hpp"

#include <cerrno>
#include <fcntl.h>
#include <sys/file.h>
#include <thread>

namespace fsd {

sup::Result<MountPointLock> MountPointLock::take(const std::string& mountpoint, std::chrono::milliseconds wait) {
  sup::UniqueFd fd(::open(mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sup::error_from_errno(errno, "cannot open mount point " + mountpoint);
  // Polled: flock has no timeout, and this runs before anything is served.
  const auto give_up = std::chrono::steady_clock::now() + wait;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) return sup::error_from_errno(errno, "cannot lock mount point " + mountpoint);
    if (std::chrono::steady_clock::now() >= give_up)
      return sup::Error{sup::Errc::busy, "another sbxfs is starting at " + mountpoint};
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return MountPointLock(std::move(fd));
}

}  // namespace fsd
