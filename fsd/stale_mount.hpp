#pragma once
// A mount point left behind by a daemon that died (kill -9): every access
// gives ENOTCONN, the mount stays in /proc/mounts, mounting over it fails
// and `fusermount3 -u` fails with EBUSY while any process has its cwd or an
// fd inside; a lazy unmount (`fusermount3 -uz`) frees the path.
#include <string>
#include <vector>

#include "supervisor/error.hpp"

namespace fsd {

/// `path` made absolute and normalised without touching it (realpath would
/// fail on a stale mount).
std::string absolute_path(const std::string& path);

/// One mount, as /proc/self/mountinfo shows it.
struct MountEntry {
  int id = 0;          ///< the mount ID (reused once unmounted)
  std::string dev;     ///< MAJOR:MINOR of its file system
  std::string fstype;  ///< e.g. fuse.sbxfs
};

/// The mounts at `path` (absolute, normalised), bottom first.
/// `read`, when given, says whether the table could be read at all (out of
/// file descriptors it cannot: then the empty answer means nothing).
std::vector<MountEntry> mounts_at(const std::string& path, bool* read = nullptr);

/// Whether the top mount at `mountpoint` is a FUSE mount whose daemon is gone.
bool stale_at(const std::string& mountpoint);

/// already_exists when a live sbxfs is mounted at `mountpoint` (absolute);
/// a stale mount is left there: until the new mount is made beneath it
/// (mount_beneath.hpp), or clean_stale_mount() detaches it just before the
/// new mount, every access still fails with ENOTCONN, where the bare folder
/// below would answer (and take a request as a file of its own).
sup::Status refuse_live_mount(const std::string& mountpoint);

/// Prepares `mountpoint` (absolute) for mounting: lazily unmounts stale FUSE
/// mounts there (umount2 MNT_DETACH as root, else `fusermount3 -uz`);
/// already_exists when a live sbxfs is mounted there.
sup::Status clean_stale_mount(const std::string& mountpoint);

}  // namespace fsd
