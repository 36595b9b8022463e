#pragma once
// Runs sbxfs-monitor for one command and reads its one-line report.
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/error.hpp"
#include "supervisor/spec.hpp"

namespace sup {

struct MonitorLaunch {
  std::string monitor_path;
  std::string record_dir;                  ///< absolute; the monitor's --dir
  std::vector<std::string> argv;           ///< the command
  std::map<std::string, std::string> env;  ///< the command's whole environment
  std::string cwd;
  double timeout_sec = 0;                  ///< 0: none
  double grace_sec = 5;
  std::uint64_t log_max = 0;               ///< output bytes kept; 0: no limit
  std::optional<Credentials> run_as;       ///< the command's uid/gid/groups
};

/// Starts the monitor and returns the command's pid once it has exec'd;
/// an exec failure comes back as an Error with the monitor's errno.
Result<pid_t> launch_monitor(const MonitorLaunch& l);

}  // namespace sup
