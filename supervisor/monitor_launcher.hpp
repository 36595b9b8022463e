#pragma once
// Starts sbxfs-monitor for each command, through the monitor's fork server
// (`sbxfs-monitor --serve`, supervisor/monitor/server.cpp), and reads each
// monitor's one-line report.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/error.hpp"
#include "supervisor/spec.hpp"
#include "supervisor/unique_fd.hpp"

namespace sup {

struct MonitorLaunch {
  std::string record_dir;                  ///< absolute; the monitor's --dir
  std::vector<std::string> argv;           ///< the command
  std::map<std::string, std::string> env;  ///< the command's whole environment
  std::string cwd;
  double timeout_sec = 0;                  ///< 0: none
  double grace_sec = 5;
  std::uint64_t log_max = 0;               ///< output bytes kept; 0: no limit
  std::optional<Credentials> run_as;       ///< the command's uid/gid/groups
};

/// Owns the fork server: started on first use, started again if it died,
/// ended (EOF on its socket) and reaped on destruction. Thread-safe.
class MonitorLauncher {
 public:
  explicit MonitorLauncher(std::string monitor_path);
  ~MonitorLauncher();
  MonitorLauncher(const MonitorLauncher&) = delete;
  MonitorLauncher& operator=(const MonitorLauncher&) = delete;

  /// Called once the command is forked (its pid given) and before it may
  /// exec; an error here cancels the start (the command never runs).
  using Publish = std::function<Status(pid_t)>;

  /// Starts the monitor and returns the command's pid once it has exec'd;
  /// an exec failure comes back as an Error with the monitor's errno.
  Result<pid_t> launch(const MonitorLaunch& l, const Publish& publish);

  /// Starts the server now rather than at the first launch (errors are
  /// left for launch() to report).
  void prestart();

  /// The server's pid, -1 when none runs (for tests).
  pid_t server_pid();

 private:
  Status start_server();  // needs mu_
  void end_server();      // needs mu_
  Status send_job(const int (&fds)[3]);

  std::string monitor_path_;
  std::mutex mu_;
  UniqueFd sock_;  // guarded by mu_
  pid_t pid_ = -1; // guarded by mu_
};

}  // namespace sup
