#pragma once
// One command's record as the supervisor keeps it in its table (the
// supervisor's lock guards it); callers only ever see CommandStatus copies.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/command_state.hpp"
#include "supervisor/command_status.hpp"
#include "supervisor/error.hpp"
#include "supervisor/exit_record.hpp"
#include "supervisor/monitor_record.hpp"
#include "supervisor/ready_condition.hpp"
#include "supervisor/ready_match.hpp"
#include "supervisor/spec.hpp"
#include "supervisor/stdin_pipe.hpp"
#include "supervisor/unique_fd.hpp"

namespace sup {

/// Whether a listing of running commands still looks at a record
/// (live_records.hpp): `no` until one finds it ended or an empty slot.
enum class Settled : std::uint8_t { no, ended, empty };

struct Record {
  std::string id;
  /// Its id's serial (Impl::serial_for), set where the record is made: what
  /// listings and inode numbers need of it, without a search of the serials
  /// per record (a tenth of a listing's time with 11 000 records).
  std::uint64_t serial = 0;
  std::optional<StartSpec> spec;
  std::optional<Error> error;
  uid_t owner_uid = 0;
  pid_t owner_sid = 0;
  MonitorInfo monitor;
  /// Where its life is (command_state.hpp): empty, running, exited or error.
  CommandState state = CommandState::running;
  ExitInfo exit;
  UniqueFd pidfd;
  int log_wd = -1;   // inotify: the log grew
  std::string log_watched;  // the file log_wd watches: index (or log, of an older monitor)
  int dir_wd = -1;   // inotify: exit.json appeared, `dropped` was created
  std::map<int, std::string> tail_wds;  // inotify: its tail segments' indexes grew, by name (the kernel drops one removed)
  // Whether the log's watches report each write (someone follows the
  // output: want_output()); otherwise they report nothing, and a command
  // that prints costs the event thread no wake-up.
  bool output_armed = false;
  std::uint64_t output_wants = 0;  // counts want_output() calls: a disarm decided before one is void
  bool truncated = false;        // `dropped` exists: output past log_max
  std::uint64_t dropped = 0;     // its size, once ended (while running: read live)
  std::optional<ReadyCondition> ready_cond;
  bool ready = false;
  // Ended, its last line not yet matched against its conditions: wait()
  // does not return yet (it would say "not ready" for a prompt at the end).
  bool telling_end = false;
  std::string ready_at;
  std::optional<ReadyMatch> ready_match;  // what made it ready
  bool ready_settled = false;             // ended, and looked at once more after a restart (ready.json)
  bool scanning = false;  // its monitor left no exit.json: /proc is being searched for what is left
  // stdin: "pipe": the daemon's write end, opened at the first write, let go
  // at the end or the close of the input (drop_stdin); the close is for good.
  std::shared_ptr<StdinPipe> stdin_pipe;
  bool stdin_closed = false;
  // queued: its place in the queue (the `queued` file), and, while it is being started, that start.
  std::uint64_t queue_seq = 0;
  std::uint64_t launch_token = 0;  // 0: waiting
  Settled settled = Settled::no;   // LiveRecords' mark
  // A STOP came while it was being started: its cgroup is frozen once the
  // command has exec'd (frozen before, it could not exec, and the start
  // would time out with the command let go).
  bool freeze_after_start = false;
  // The ended run this one replaced (a slot run again), as it was at its
  // end: what a file bound to that run (events) tells of it afterwards.
  std::shared_ptr<const CommandStatus> previous_run;
};

/// What a record shows: its state, or error when a file of it cannot be read
/// and its command is not running. One that runs (a torn spec.json or
/// monitor.json found at a restart, its monitor alive) shows running, with
/// its `error`, until it ends: so a listing that found it ended never has
/// to look at it again (live_records.hpp).
inline CommandState shown_state(const Record& r) {
  return r.error && !is_running(r.state) ? CommandState::error : r.state;
}

/// The state a running record's monitor.json says (restart policy): a run
/// under way, or the delay before the next one (restartAt).
inline CommandState apply_run_state(CommandState s, const MonitorInfo& m) {
  return transition(s, m.restart_at.empty() ? CommandEvent::started : CommandEvent::run_ended).next;
}

/// A signal, a readiness condition or a probe needs a running command.
inline Status check_started(const std::string& id, const Record& r) {
  if (r.state == CommandState::empty) return Error{Errc::no_such_process, "'" + id + "' has not been started"};
  if (r.state == CommandState::queued)
    return Error{Errc::no_such_process, "'" + id + "' is queued: it has not started yet"};
  if (has_ended(r.state)) return Error{Errc::no_such_process, "'" + id + "' has ended"};
  return Ok{};
}

/// What in a process's environment marks it as one of `r`'s: SBX_BGID and
/// the request's env overlay (the daemon's SBX_MOUNT names its mount).
/// Empty without an overlay: SBX_BGID alone is not unique across daemons.
inline std::vector<std::string> env_marks(const Record& r) {
  if (!r.spec || r.spec->env.empty()) return {};
  std::vector<std::string> marks = {"SBX_BGID=" + r.id};
  for (const auto& [k, v] : r.spec->env)
    if (!r.spec->secret_env.count(k)) marks.push_back(k + "=" + v);
  return marks;
}

}  // namespace sup
