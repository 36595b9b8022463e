#pragma once
// The files every start writes in its record's folder, made ahead in each
// spare folder (spare_folders.hpp), so that the start writes into them
// instead of creating them on its path:
// - spec.json.tmp and monitor.json.tmp: spec.json (by the supervisor) and
//   monitor.json (by the monitor) are written through NAME.tmp, which is
//   opened without O_EXCL and written in place (atomic_write.hpp);
// - ctl: the monitor's FIFO, kept by the monitor when it finds one;
// - exit.json.tmp: the space exit.json needs, reserved (the monitor
//   reserves it itself where it is missing, before the command runs).
// A start that finds a bare folder (no spare left) creates them as before.

namespace sup {

/// Spare folders kept ready: enough for the starts of a few writers at once.
inline constexpr unsigned kStartFolderSpares = 8;

/// Fills the new, empty folder `dirfd`; 0 or an errno.
int prepare_start_folder(int dirfd);

}  // namespace sup
