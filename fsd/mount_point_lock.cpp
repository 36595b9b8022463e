#include "fsd/mount_point_lock.hpp"

#include <cerrno>
#include <fcntl.h>

#include <filesystem>

#include "supervisor/files.hpp"

namespace fsd {

sup::Result<MountPointLock> MountPointLock::take(const std::string& mountpoint, std::chrono::milliseconds wait) {
  const std::string holder = std::filesystem::path(mountpoint).parent_path().string();
  sup::UniqueFd fd(::open(holder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // A folder its user may only pass through: the mount point itself, as
  // any daemon of that user does there (it opens while no dead mount is on it).
  if (!fd && errno == EACCES) fd.reset(::open(mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sup::error_from_errno(errno, "cannot open " + holder + ", which holds the mount point");
  if (const int err = sup::lock_within(fd.get(), wait)) {
    if (err == EWOULDBLOCK) return sup::Error{sup::Errc::busy, "another sbxfs is starting at " + mountpoint};
    return sup::error_from_errno(err, "cannot lock mount point " + mountpoint);
  }
  return MountPointLock(std::move(fd));
}

}  // namespace fsd
