#pragma once
// The integration fixture: a real sbxfs mounted in a throwaway directory.
//
// SetUp makes DIR/{mnt,state}, starts `sbxfs -f --state-dir DIR/state
// DIR/mnt` (output to DIR/daemon.log) and waits for the mount. TearDown
// always stops the commands, unmounts, kills the daemon and anything left
// that was started for the test, removes DIR, and prints daemon.log when the
// test failed. A watchdog kills the daemon if a test overruns its budget, so
// a hung FUSE call fails the test instead of hanging the suite.
//
// Every helper is bounded: shell commands run under `timeout`, waits poll a
// condition until a deadline; nothing sleeps to synchronise.
#include <fcntl.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace sbxit {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

/// The outcome of a child process: exit code (128+N when killed by signal N,
/// -2 when it outlived the deadline), its output, and how long it took.
struct RunResult {
  int code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

/// Plain file I/O results: `err` is the errno of the first failing call
/// (open, read/write or close), 0 on success.
struct FileResult {
  int err = 0;
  std::string data;
};

/// Polls `pred` every `interval` until it holds (true) or `timeout` ran out
/// (false; `pred` is evaluated one last time).
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval = 20ms);

/// open(O_RDONLY) + read to EOF + close.
FileResult read_file(const std::string& path);
/// open(flags) + write everything + close; returns the errno of the first
/// failure, 0 on success. `data` is written in as few write() calls as the
/// kernel accepts.
int write_file(const std::string& path, std::string_view data, int flags = O_WRONLY | O_TRUNC);
/// mkdir / rmdir / stat returning errno (0 on success).
int mkdir_errno(const std::string& path);
int rmdir_errno(const std::string& path);
int stat_errno(const std::string& path);
/// Directory entries without . and .., in readdir order; *err gets errno.
std::vector<std::string> list_dir(const std::string& path, int* err = nullptr);

/// True while /proc/PID exists and is not a zombie.
bool pid_alive(pid_t pid);
/// "EINVAL" for EINVAL, etc.
std::string errno_name(int e);
/// The real python3 executable (not a pyenv shim).
const std::string& python_path();
/// How many mounts of fstype fuse.sbxfs sit at `mnt` (in /proc/self/mountinfo).
int sbxfs_mount_count(const std::string& mnt);
/// Parses JSON or returns a discarded value (is_discarded()).
json parse_json(const std::string& text);
/// The last step of `kind` for `id` in a steps list (steps.json); null if none.
json step_of(const json& steps, const std::string& id, const std::string& kind);
/// Matches `^[0-9]{4,}$`, the shape of an automatic bgId.
bool is_auto_id(const std::string& id);
/// Whether process `pid` waits for an answer of a FUSE daemon (/proc/PID/wchan).
bool blocked_in_fuse(pid_t pid);
/// Matches an ISO-8601 UTC timestamp such as 2026-11-29T22:15:47.123Z.
bool is_iso_time(const json& v);
/// That form of the time `seconds` ago: a record's end that no retention
/// (keep_ended_sec, a week by default) has removed yet, whatever the date.
std::string iso_time_ago(int seconds);

class SbxfsTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // ---- configuration (set in a derived fixture's constructor) ----
  /// Extra daemon arguments before the mount point, e.g. {"-o", "wait_timeout=1"}.
  std::vector<std::string> daemon_options_;
  /// A program (and its arguments) that execs the daemon's command line,
  /// e.g. {WITHOUT_CLONE3_PATH}; empty: the daemon is run directly.
  std::vector<std::string> daemon_wrapper_;
  /// Per-test budget of the watchdog.
  std::chrono::seconds watchdog_budget_{60};

  // ---- paths ----
  std::string dir_;    ///< the temp dir (also the tag in every child's environment)
  std::string mnt_;    ///< dir_/mnt
  std::string state_;  ///< dir_/state
  std::string log_path_;  ///< dir_/daemon.log
  std::string p(const std::string& rel) const { return mnt_ + "/" + rel; }

  // ---- children ----
  using Env = std::map<std::string, std::string>;
  /// `timeout T sh -c CMD` with MNT, T (= dir_), STATE, PY in the environment.
  RunResult run(const std::string& sh_command, int timeout_sec = 20, const Env& env = {});
  /// `timeout T bash -c CMD` (bash's error messages name the errno).
  RunResult bash(const std::string& bash_command, int timeout_sec = 20, const Env& env = {});
  /// `timeout T python3 -c CODE`; the code finds the mount in os.environ['MNT'].
  RunResult python(const std::string& code, int timeout_sec = 20, const Env& env = {});
  /// Python's buffered text file: `with open(MNT/REL, 'w') as f: f.write(TEXT)`
  /// (its close writes a refused write's bytes again, and raises).
  RunResult python_write(const std::string& rel, const std::string& text);
  /// `timeout T ARGV...` (argv[0] looked up in PATH).
  RunResult run_argv(const std::vector<std::string>& argv, int timeout_sec = 20, const Env& env = {});
  /// Starts `/bin/sh -c CMD` in its own process group (output to `out`, default
  /// /dev/null); TearDown kills the group. Returns its pid (= pgid).
  pid_t spawn_bg(const std::string& sh_command, const std::string& out = "/dev/null");
  /// Reaps a spawn_bg child: its exit code (128+sig), or nullopt at the deadline.
  std::optional<int> wait_bg(pid_t pid, std::chrono::milliseconds timeout);
  /// `strace -f -p DAEMON STRACE_ARGS` in the background (a spawn_bg child),
  /// once it has attached: its pid; -1 with `why` when it could not attach
  /// (tracing another process needs the right to: not every box gives it).
  pid_t trace_daemon(const std::string& strace_args, std::string& why) { return trace(daemon_pid(), strace_args, why); }
  /// The same for any process of the test's (a monitor, a command).
  pid_t trace(pid_t pid, const std::string& strace_args, std::string& why);

  // ---- the tree ----
  /// Starts a request through the root cmd with the bash read-back idiom
  /// (`exec 3<>cmd; printf '%s\n' REQ >&3; read -r id <&3`). Returns the
  /// bgId; on failure adds a test failure and returns "".
  std::string start(const std::string& request);
  /// procs/ID/status.json parsed (discarded on failure, with a test failure).
  json status_json(const std::string& id);
  /// status.json at the root.
  json root_status();
  /// `timeout T cat procs/ID/wait` parsed; discarded (+ failure) on error.
  json wait_json(const std::string& id, int timeout_sec = 10);
  /// Polls procs/ID/status.json until running is false; returns the record.
  json wait_ended(const std::string& id, std::chrono::milliseconds timeout = 10s);
  /// Entries of procs/, in readdir order.
  std::vector<std::string> procs();
  /// The contents of MNT/REL (a test failure if it cannot be read).
  std::string file(const std::string& rel);
  /// procs/ID/log.
  std::string log(const std::string& id) { return file("procs/" + id + "/log"); }
  /// The lines of `errors`, parsed.
  std::vector<json> errors();
  /// The box's steps.json holds a step of `kind` for `id` (a stop's, for
  /// one, is noted before its write is parked: the request reached the daemon).
  bool has_step(const std::string& kind, const std::string& id);

  // ---- the daemon ----
  /// Starts the daemon (same state dir and mount point) and waits for the mount.
  bool start_daemon(const std::vector<std::string>& extra = {});
  /// Sends `sig` to the daemon and, if `reap`, waits (bounded) for it to end.
  /// Returns its exit status as for RunResult::code (or -2 if still alive).
  int kill_daemon(int sig, bool reap = true);
  /// kill -9 the daemon, then start it again on the same state dir and mount point.
  bool restart_daemon();
  /// Adopts an already running daemon that is not our child (background mode).
  void adopt_daemon(pid_t pid);
  pid_t daemon_pid() const;
  /// The daemon's output so far.
  std::string daemon_log() const;

  /// Gives the running test `extra` more watchdog time.
  void extend_watchdog(std::chrono::seconds extra);

 private:
  std::vector<std::string> child_env(const Env& extra) const;
  bool wait_mounted(pid_t pid, std::chrono::milliseconds timeout);
  void stop_all_commands();
  void unmount_all();
  void kill_leftovers();
  void remove_leftover_cgroups();
  void watchdog_loop();

  mutable std::mutex mu_;
  pid_t daemon_pid_ = 0;         // guarded by mu_
  bool daemon_is_child_ = true;  // guarded by mu_
  std::vector<pid_t> bg_pids_;   // guarded by mu_
  std::set<std::string> cgroup_subtrees_;  // of the daemons seen mounted; guarded by mu_
  Clock::time_point watchdog_deadline_;  // guarded by mu_
  bool watchdog_stop_ = false;   // guarded by mu_
  bool watchdog_fired_ = false;  // guarded by mu_
  std::condition_variable watchdog_cv_;
  std::thread watchdog_;
};

}  // namespace sbxit
