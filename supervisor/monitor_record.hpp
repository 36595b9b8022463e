#pragma once
// monitor.json, who runs a command (FORMAT.md): written by the monitor once
// the command is forked, read by the supervisor. pid + start time name a
// process even after pid reuse. Under a restart policy the monitor writes it
// again for each run, and when a run has ended and the next one is due. A file that does not parse is an io_error
// naming it, never an exception.
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "supervisor/error.hpp"

namespace sup {

/// The record's file name in a command's folder.
inline constexpr const char* kMonitorFile = "monitor.json";
/// Made (empty) by the monitor when it begins a stop of its own (a
/// timeout's), or once a stop has lasted 50 ms: a supervisor that sent no
/// stop (or was restarted since) learns that the command is being stopped
/// (a STOP is refused then, and a paused one is thawed). Removed before a
/// restart policy's next run.
inline constexpr const char* kStoppingFile = "stopping";

struct MonitorInfo {
  pid_t monitor_pid = 0, pid = 0;
  std::uint64_t monitor_start = 0, pid_start = 0;  ///< field 22 of /proc/PID/stat
  std::string started_at;
  std::string cgroup;  ///< the command's cgroup; empty: tracked as a process tree
  /// Under a restart policy: the runs started after the first (pid and
  /// startedAt are the latest run's), and while the delay before the next
  /// run goes, when it ends (empty: a run is under way).
  std::uint64_t restarts = 0;
  std::string restart_at;
};

/// The file's text, one line.
std::string format_monitor(const MonitorInfo& m);
Result<MonitorInfo> parse_monitor(const std::string& text);

}  // namespace sup
