#pragma once
// What the supervisor reads of the files a monitor writes into a record's
// folder (FORMAT.md): exit.json and monitor.json. A file that does not
// parse is an io_error naming it, never an exception.
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "supervisor/error.hpp"

namespace sup {

/// exit.json: how the command ended.
struct ExitInfo {
  std::optional<int> exit_code;
  std::string signal, end_reason, finished_at;
  bool timed_out = false;
  std::string end_note;          ///< why the end is unknown
  std::uint64_t output_lost = 0;  ///< log bytes the monitor could not write
};

Result<ExitInfo> parse_exit(const std::string& text);

/// monitor.json: who runs it (pid + start time name a process even after pid reuse).
struct MonitorInfo {
  pid_t monitor_pid = 0, pid = 0;
  std::uint64_t monitor_start = 0, pid_start = 0;
  std::string started_at;
  std::string cgroup;  ///< the command's cgroup; empty: tracked as a process tree
};

Result<MonitorInfo> parse_monitor(const std::string& text);

/// Whether `name`, a folder in procs/ that an older build left, is one of
/// its staging folders (`.new-ID`: a start, `.del-ID.N`: a removal) rather
/// than a record a user named so: a record's spec.json names the folder
/// itself as its bgId, and a named slot holds `slot` (kept: never lose a
/// record). Today's builds stage in STATE/staging/, never in procs/.
bool is_legacy_staging(const std::string& procs_dir, const std::string& name);

}  // namespace sup
