#pragma once
// Replacing a dead daemon's mount without a moment of bare folder. Between
// the stale mount's detach and the new mount the folder below would answer
// (a write to `cmd` there makes a plain file and succeeds: a request lost).
// So, as root on a kernel that has MOVE_MOUNT_BENEATH (Linux 6.5), the new
// mount is made at a private staging folder, moved beneath the stale one
// and only then is the stale one detached: the path answers ENOTCONN, then
// the new mount.
#include <string>

#include <fuse_lowlevel.h>

#include "supervisor/error.hpp"

namespace fsd {

/// Mounts `se` at `mountpoint` (absolute, a stale FUSE mount on top) by way
/// of `staging` (a folder path of the daemon's own, made and removed here;
/// one left by a daemon that died there is cleared first). False when
/// nothing was mounted (no private staging mount here: the caller mounts
/// the usual way); where the kernel refuses to mount beneath, the stale
/// mount is detached and the new one moved in plainly; an error once the
/// new mount could not be moved in. Mounted, `se` names the staging path:
/// unmount `mountpoint` with unmount_moved(), not fuse_session_unmount().
sup::Result<bool> mount_beneath_stale(fuse_session* se, const std::string& mountpoint, const std::string& staging);

/// Lazily unmounts a mount made by mount_beneath_stale (root).
void unmount_moved(const std::string& mountpoint);

/// Detaches whatever a daemon that died mid-way left mounted at `staging`, and removes it.
void clear_staging(const std::string& staging);

}  // namespace fsd
