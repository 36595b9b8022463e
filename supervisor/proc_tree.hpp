#pragma once
// What /proc says about processes: identity (pid + start time, safe against
// pid reuse) and the CPU used by a monitor's whole tree.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sup {

/// Field 22 of /proc/PID/stat (clock ticks since boot); nullopt if gone.
std::optional<std::uint64_t> process_start_time(pid_t pid);
/// The process has exited but is not reaped yet (state Z or X).
bool process_is_zombie(pid_t pid);
/// Every live descendant of `pid` (through /proc/PID/task/*/children).
std::vector<pid_t> descendants(pid_t pid);
/// CPU ticks used by `monitor` and its whole tree: its reaped children
/// (cutime+cstime, it reaps them all as subreaper) plus every live descendant.
/// `start`, if given, gets the monitor's start time (field 22; 0 if gone).
std::uint64_t tree_cpu_ticks(pid_t monitor, std::uint64_t* start = nullptr);
/// pidfd_open(2); -1 with errno on failure.
int open_pidfd(pid_t pid);

/// For a command whose monitor died without a word (so its adopted orphans
/// went to init): SIGKILLs what is left of it, that is the live processes
/// of the root's session and process group, those whose environment holds
/// every one of `env_marks` (none: no such search), each started no earlier
/// than the root (`root_start`, field 22), and all their descendants.
/// Returns how many it killed.
std::size_t kill_orphaned_tree(pid_t root, std::uint64_t root_start, const std::vector<std::string>& env_marks);

}  // namespace sup
