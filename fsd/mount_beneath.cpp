#include "fsd/mount_beneath.hpp"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "fsd/stale_mount.hpp"

#ifndef MOVE_MOUNT_BENEATH
#define MOVE_MOUNT_BENEATH 0x00000200
#endif

namespace fsd {

namespace {

// glibc 2.36 has no move_mount() wrapper.
int move_mount_path(const std::string& from, const std::string& to, unsigned flags) {
  return static_cast<int>(::syscall(SYS_move_mount, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags));
}

}  // namespace

void clear_staging(const std::string& staging) {
  // Stacked: the FUSE mount on the private bind.
  for (int i = 0; i < 4 && ::umount2(staging.c_str(), MNT_DETACH) == 0; ++i) {
  }
  ::rmdir(staging.c_str());
}

sup::Result<bool> mount_beneath_stale(fuse_session* se, const std::string& mountpoint, const std::string& staging) {
  clear_staging(staging);
  if (::mkdir(staging.c_str(), 0700) != 0) return false;
  // A private bind of its own: a mount under a shared one cannot be moved.
  if (::mount(staging.c_str(), staging.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, staging.c_str(), nullptr, MS_PRIVATE, nullptr) != 0 ||
      fuse_session_mount(se, staging.c_str()) != 0) {
    clear_staging(staging);
    return false;
  }
  sup::Status moved = sup::Ok{};
  if (move_mount_path(staging, mountpoint, MOVE_MOUNT_BENEATH) == 0) {
    // The stale mount goes now that ours is below it (where it cannot,
    // ours stays hidden below it: a dead mount too once we exit).
    if (::umount2(mountpoint.c_str(), MNT_DETACH) != 0)
      moved = sup::error_from_errno(errno, "umount2(" + mountpoint + ", MNT_DETACH)");
  } else if (sup::Status s = clean_stale_mount(mountpoint); !s) {
    moved = s;
    ::umount2(staging.c_str(), MNT_DETACH);  // ours, still there
  } else if (move_mount_path(staging, mountpoint, 0) != 0 &&
             ::mount(staging.c_str(), mountpoint.c_str(), nullptr, MS_MOVE, nullptr) != 0) {
    // (MS_MOVE: a kernel without move_mount, before 5.2.)
    moved = sup::error_from_errno(errno, "cannot move the mount from " + staging + " to " + mountpoint);
    ::umount2(staging.c_str(), MNT_DETACH);  // ours, still there
  }
  clear_staging(staging);
  if (!moved) return moved.error();
  return true;
}

void unmount_moved(const std::string& mountpoint) {
  if (::umount2(mountpoint.c_str(), MNT_DETACH) != 0)
    fuse_log(FUSE_LOG_WARNING, "sbxfs: umount2(%s, MNT_DETACH): %s\n", mountpoint.c_str(), std::strerror(errno));
}

}  // namespace fsd
