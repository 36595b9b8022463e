#pragma once
// What /proc says about processes, for the daemon and the monitor alike:
// identity (pid + start time, safe against pid reuse), the descendants of a
// process, and the CPU a monitor's whole tree used. No allocation in the
// single-process readers; no exceptions (the monitor links statically).
//
// Descendants are found from the parent of every process in /proc/*/stat,
// not from /proc/PID/task/TID/children: that file exists only on kernels
// built with CONFIG_PROC_CHILDREN (some are not), and the kernel documents
// it as possibly incomplete while children exit or are re-parented.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace sup {

/// The fields of /proc/PID/stat that are used here.
struct ProcStat {
  char state = '?';  ///< field 3: R S D Z X ...
  pid_t ppid = 0, pgrp = 0, session = 0;  ///< fields 4, 5, 6
  std::uint64_t utime = 0, stime = 0, cutime = 0, cstime = 0;  ///< fields 14-17, clock ticks
  std::uint64_t starttime = 0;  ///< field 22: clock ticks since boot
};

/// Reads /proc/PID/stat. False when the process is gone or the file is odd.
bool read_proc_stat(pid_t pid, ProcStat* out);
/// Field 22 of /proc/PID/stat; nullopt if gone.
std::optional<std::uint64_t> process_start_time(pid_t pid);
/// The process has exited but is not reaped yet (state Z or X).
bool process_is_zombie(pid_t pid);

struct ProcEntry {
  pid_t pid = 0;
  ProcStat stat;
};
/// Every process on the system, in one pass over /proc.
std::vector<ProcEntry> scan_processes();
/// The descendants of `root` among `all` (root excluded), parents first.
std::vector<ProcEntry> descendants_in(const std::vector<ProcEntry>& all, pid_t root);
/// Every live descendant of `pid` (a scan of /proc).
std::vector<pid_t> descendants(pid_t pid);

/// CPU ticks used by `monitor` and its whole tree: its reaped children
/// (cutime+cstime, it reaps them all as subreaper) plus every live
/// descendant, found in `all`. `start`, if given, gets the monitor's start
/// time (field 22; 0 if gone).
std::uint64_t tree_cpu_ticks(pid_t monitor, const std::vector<ProcEntry>& all, std::uint64_t* start = nullptr);
/// The same, with a scan of its own.
std::uint64_t tree_cpu_ticks(pid_t monitor, std::uint64_t* start = nullptr);

/// pidfd_open(2); -1 with errno on failure (ENOSYS without pidfds).
int open_pidfd(pid_t pid);
/// pidfd_send_signal(2); 0 or -1 with errno.
int pidfd_signal(int pidfd, int sig);

/// The kernel's oom_kill counter from /proc/vmstat; -1 when unavailable.
/// Remembers where in the file the line was (a process forked after a
/// read inherits that): the next read starts just before it.
long long read_oom_kill_count();
/// Where the oom_kill line began at the last read (0: none yet).
std::size_t oom_kill_line_offset();

}  // namespace sup
