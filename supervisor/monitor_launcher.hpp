#pragma once
// Starts sbxfs-monitor for each command, through the monitor's fork server
// (`sbxfs-monitor --serve`, supervisor/monitor/server.cpp), and reads each
// monitor's report lines: "forked PID", then "ok PID"; or "err ERRNO MESSAGE"
// in place of either.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
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
  std::string cwd;                         ///< where the monitor changes to (as root)
  bool enter_as_user = false;              ///< and then the command, by that path, with run_as's rights (--enter-as-user)
  double timeout_sec = 0;                  ///< 0: none
  double grace_sec = 5;
  std::uint64_t log_max = 0;               ///< output bytes kept; 0: no limit
  std::optional<Credentials> run_as;       ///< the command's uid/gid/groups
  std::string cgroup;                      ///< the command's (empty) cgroup; empty: none
  bool stdin_pipe = false;                 ///< the command reads the record's `stdin` FIFO (--stdin pipe)
  RestartPolicy restart = RestartPolicy::no;  ///< run by the monitor
  double restart_delay_sec = 1;
  std::optional<std::uint64_t> max_restarts;
  int notify_fd = 0;                       ///< readyFd: the command's notification descriptor; 0: none
  std::string script;                      ///< an argument that is a script file the command reads through the monitor (--script)
  bool simple = false;                     ///< argv is /bin/sh -c TEXT of shell text: a simple command runs without the shell (--simple)
};

/// One launch under way, driven by its owner without blocking: wait until
/// report_fd() is readable (and job_fd(), while it is >= 0, writable), then
/// send_job() and next_line(). Between "forked" and go() the command is
/// forked but waits; cancel() (or destruction) makes it exit without exec.
class PendingLaunch {
 public:
  PendingLaunch(UniqueFd job, std::string job_bytes, UniqueFd report, UniqueFd go);
  /// The job socket while part of the job is unsent; -1 after.
  int job_fd() const { return job_.get(); }
  int report_fd() const { return report_.get(); }
  /// Sends what the socket takes of the rest of the job; true when nothing
  /// is left to send (then end_job()).
  bool send_job();
  /// Closes the job socket: EOF ends the job.
  void end_job() { job_.reset(); }
  /// The next whole report line, nullopt while none is there yet; at EOF
  /// whatever is left (maybe ""), and eof() turns true.
  std::optional<std::string> next_line();
  bool eof() const { return eof_; }
  /// Lets the forked command exec.
  void go();
  /// EOF on the go socket: a command not yet let go exits without exec.
  void cancel();

  /// "forked PID" / "ok PID" (`expect` is the first word) as the pid, or
  /// the monitor's error (its errno and message), or an io_error for anything else.
  static Result<pid_t> parse(const std::string& line, const char* expect);

 private:
  UniqueFd job_, report_, go_;
  std::string job_bytes_;
  std::size_t sent_ = 0;
  std::string buf_;
  bool eof_ = false;
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

  /// Hands the job to the server without blocking (a server that takes no
  /// more jobs is try_again); the caller drives the rest.
  Result<std::unique_ptr<PendingLaunch>> begin(const MonitorLaunch& l);

  /// Starts the monitor and returns the command's pid once it has exec'd;
  /// an exec failure comes back as an Error with the monitor's errno. Blocks
  /// (up to `limit` for each report): for tests and tools.
  Result<pid_t> launch(const MonitorLaunch& l, const Publish& publish,
                       std::chrono::milliseconds limit = std::chrono::seconds(60));

  /// Starts the server now rather than at the first launch (errors are
  /// left for launch() to report).
  void prestart();

  /// The server's pid, -1 when none runs (for tests).
  pid_t server_pid();
  /// How long the launcher's end waits for the server to exit before SIGKILL.
  static constexpr int kServerExitMs = 1000;

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
