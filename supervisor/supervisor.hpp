#pragma once
// The supervisor: starts commands under per-command monitors, keeps their
// records in a state directory (FORMAT.md) and tells subscribers what
// happens. A facade over value snapshots: callers get copies, never
// references into its tables. Thread-safe; one lock inside.
//
// Events (ended, output, removed, started) and timers run on one internal
// event-loop thread, never under the supervisor's lock, so a listener may
// call back into the Supervisor. That thread only dispatches: slow work
// (removing records, scanning /proc for a lost command's processes, and
// whatever a caller hands to post_work) runs on a small worker pool.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "supervisor/command_status.hpp"
#include "supervisor/error.hpp"
#include "supervisor/retention.hpp"
#include "supervisor/log_limit.hpp"
#include "supervisor/ready_condition.hpp"
#include "supervisor/spec.hpp"

namespace sup {

struct SupervisorOptions {
  std::string state_dir;          ///< created (0700) if missing
  std::string monitor_path;       ///< the sbxfs-monitor executable; empty: default_monitor_path()
  /// The daemon's mount point: a request's cwd or PATH that leads into it
  /// is not looked at by the supervisor (own_mount.hpp); the monitor finds
  /// out. Empty: none.
  std::string own_mount;
  std::vector<std::string> secrets;  ///< values masked everywhere (--secrets-file)
  /// Ended records kept (with their logs); past it the oldest are removed.
  RetentionPolicy retention;
  /// Commands running at once; a start past it is try_again. 0: no limit.
  std::size_t max_running = 2000;
  /// Commands one user (by uid) may run at once, starts in progress
  /// included; a start past it is try_again. 0: no limit.
  std::size_t max_running_per_user = 0;
  std::uint64_t log_max = kDefaultLogMax;  ///< output bytes kept per command; 0: no limit
  /// How long a start waits for each of the monitor's two reports (forked,
  /// exec'd) before it is given up as timed_out.
  std::chrono::milliseconds start_timeout = std::chrono::seconds(60);
  /// Where commands get their cgroups: "" finds a writable cgroup v2 (see
  /// find_cgroup_hierarchy), "off" tracks process trees, else a cgroup v2 directory.
  std::string cgroup;
  /// Processes of the daemon's that share its cgroup and move with it to a
  /// leaf where that is needed (find_cgroup_hierarchy): the parent of a
  /// background start.
  std::vector<pid_t> cgroup_companions;
};

/// sbxfs-monitor next to the running executable, else the build-time path.
std::string default_monitor_path();

enum class StartMode {
  new_only,     ///< a taken name is already_exists
  reuse_slot,   ///< the name must be an empty slot or an ended command (replaced); running: busy; none: not_found
};

struct Event {
  /// stdin_writable: the command's stdin pipe, found full by write_stdin,
  /// has room again (or no reader left).
  enum class Kind { started, output, ready, ended, removed, stdin_writable };
  Kind kind;
  std::string bg_id;
  std::uint64_t serial = 0;  ///< removed: the record's serial (a record made again under the name has another)
};

/// What a directory listing needs of a record: no strings but the id, no /proc.
struct RecordEntry {
  std::string bg_id;
  std::uint64_t serial = 0;
  uid_t owner_uid = 0;
  bool empty = false;  ///< an empty named slot
};

/// What a listing of ended records needs to tell one run from another
/// without a snapshot: a record that has ended never changes, until its
/// named slot runs again (another startedAt) or it is removed.
struct EndedEntry {
  std::string bg_id;
  std::uint64_t serial = 0;
  uid_t owner_uid = 0;
  std::string started_at;
  std::string finished_at;
};

/// Whether a status carries a fresh `cpu` figure (a few /proc reads) or 0.
enum class CpuFigure { sample, skip };

struct SupervisorInfo {
  pid_t pid;
  std::string started_at;
  std::string state_dir;
  std::string tracking;  ///< "cgroup" or "proctree": how new commands are tracked
  std::string cgroup;    ///< the subtree of the commands' cgroups; or why there is none
};

class Supervisor {
 public:
  using Listener = std::function<void(const Event&)>;
  /// Whether a subscriber still follows a command's output (any thread; it
  /// must not call into the supervisor).
  using OutputInterest = std::function<bool(const std::string& id)>;
  using TimerCallback = std::function<void()>;
  using Clock = std::chrono::steady_clock;
  /// Told the outcome of start_async: the command's record once it has exec'd, or why not.
  using StartDone = std::function<void(Result<CommandStatus>)>;
  /// Told on the event thread once a start's record is published, just
  /// before its command is let go to exec: what must be on disk before the
  /// command may run goes here (a daemon killed after the go leaves the
  /// command running). A start refused earlier, or queued, is never told.
  using StartPublished = std::function<void(const CommandStatus&)>;

  /// Opens (or creates) the state directory and takes back every command in it.
  static Result<std::unique_ptr<Supervisor>> open(SupervisorOptions opts);
  ~Supervisor();  ///< stops the event loop; running commands keep running
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Starts a command without waiting for it. A request that fails
  /// validation (bad spec, taken name, max_running...) calls `done` at once
  /// on the calling thread; otherwise `done` is called exactly once, later,
  /// on the event thread, when the monitor has reported the exec's outcome.
  /// The record exists (and is listed) before the command may exec; a
  /// failed start leaves no record. An exec failure is the monitor's errno;
  /// no report within start_timeout is timed_out; `stop` (a stop request
  /// before the outcome) is interrupted. A start that fails after its
  /// command was let go to exec (a timeout, a stop, cancel_starts) kills
  /// the command and its monitor first: nothing of it keeps running.
  /// `published`, when given, is told before the command is let go.
  void start_async(const StartSpec& spec, StartMode mode, StartDone done, std::stop_token stop = {},
                   StartPublished published = {});
  /// start_async, waiting for the outcome. Not from the event thread (busy).
  Result<CommandStatus> start(const StartSpec& spec, StartMode mode = StartMode::new_only);
  /// Fails every start under way whose command was not let go to exec yet
  /// with io_error (nothing runs), waits for the outcome of the others
  /// (their monitor's report, at most 5 s or start_timeout: a command let
  /// go may have run, and is not to be told it did not; past that wait it
  /// is killed and failed as before), and returns once every
  /// `done` call has returned; later starts fail at once. For shutdown:
  /// after it no `done` runs.
  void cancel_starts();
  /// Makes an empty named slot (`mkdir procs/NAME`).
  Result<CommandStatus> create_slot(const std::string& name, uid_t owner_uid, pid_t owner_sid);
  /// Asks the monitor to stop the whole tree (TERM, KILL after the grace).
  /// Returns at once; an `ended` event follows. Ended or empty: succeeds, no-op.
  Status stop(const std::string& id);
  /// Sends `sig` to the whole tree; an ended command is no_such_process.
  Status signal(const std::string& id, int sig);
  /// Sets or replaces the ready condition of a running command that is not
  /// ready yet; probing restarts (a log condition searches from the start
  /// of the log). A command that is ready stays so: on it this succeeds and
  /// changes nothing.
  Status set_ready(const std::string& id, const ReadyCondition& c);
  /// Probes `c` on running command `id` for one reader alone: the record's
  /// own condition stays as it is, and its ready/readyAt too unless `c` is
  /// that condition (then the record is marked ready first, and the reader
  /// is answered when the record's own probe holds first). `on_ready` runs at
  /// most once, on the event thread, when `c` holds, with what matched; never after
  /// cancel_probe() of the token returned; it must not call cancel_probe().
  /// Each token must be cancelled. Never started: no_such_process. Ended:
  /// a log condition is searched in the whole log at once, and `on_ready`
  /// runs before this returns, in the caller's thread, if it matched; the
  /// token is 0 (no probe).
  Result<std::uint64_t> probe_for_reader(const std::string& id, const ReadyCondition& c,
                                         std::function<void(const ReadyMatch&)> on_ready);
  /// Ends the probe of probe_for_reader(); waits for an on_ready under way.
  void cancel_probe(std::uint64_t token);
  /// Writes what fits now of `data` into command `id`'s standard input (a
  /// request with stdin: "pipe"): the bytes taken, 0 only when the pipe is
  /// full; then a stdin_writable event of `id` follows once it has room.
  /// broken_pipe when the command has no such input, has not started, has
  /// ended, closed its stdin, or its input was closed. Never blocks.
  Result<std::size_t> write_stdin(const std::string& id, std::string_view data);
  /// All of `data` into `id`'s input now, or nothing (StdinPipe::write_whole):
  /// for a writer that must not wait on the command (a rename). Never blocks.
  Result<std::size_t> write_stdin_whole(const std::string& id, std::string_view data);
  /// Closes command `id`'s standard input: it reads EOF after what was
  /// written (its monitor lets go of its write end; later writes are
  /// broken_pipe). Ended, or closed already: succeeds, a no-op.
  /// broken_pipe for a command without stdin: "pipe".
  Status close_stdin(const std::string& id);
  /// Removes an ended command's (or empty slot's) record and logs; busy while running.
  Status remove(const std::string& id);

  /// One record; with CpuFigure::sample its tree's CPU is sampled when the
  /// last sample is older than a second (only a view that shows `cpu` asks:
  /// without a cgroup a sample is a walk of /proc).
  std::optional<CommandStatus> status(const std::string& id, CpuFigure cpu = CpuFigure::skip) const;
  /// The run whose CommandStatus::log_owner is `log_owner`: the record
  /// under the name, if it is that run, or, if the record replaced that
  /// run (a slot run again) once it had ended, that run's status at its
  /// end; none when neither is (removed, replaced more than once).
  std::optional<CommandStatus> run_status(const std::string& id, std::uint64_t log_owner) const;
  /// The uid whose record has the name `id` now (none: no record); cheaper
  /// than status() for a handle that checks on every write.
  std::optional<uid_t> owner_of(const std::string& id) const;
  /// Process `pid` is of command `id`'s tree: a descendant of its monitor,
  /// which every process of the tree stays below (a subreaper).
  bool in_tree(const std::string& id, pid_t pid) const;
  /// Reads the record's monitor.json now rather than at its news: a
  /// restart's run is published before it runs, but the event thread may
  /// not have heard of it when the run's first instruction asks.
  void notice_run(const std::string& id);
  /// Every record, in bgId order (auto ids sort in start order). `cpu` of
  /// the running ones is sampled as CpuSampler::percents says: fresh, within
  /// a time budget per call.
  std::vector<CommandStatus> list() const;
  /// Every record's id, serial and owner, in serial order (the order a
  /// listing shows): for listings.
  /// With `generation`, also listing_generation() at that moment.
  std::vector<RecordEntry> entries(std::uint64_t* generation = nullptr) const;
  /// Changes whenever what entries() returns may have changed (a record
  /// made, replaced or removed): equal numbers, equal listings.
  std::uint64_t listing_generation() const;
  /// The records found unreadable when the state directory was taken back:
  /// their ids and why (each shows state error, or runs on with its error).
  std::vector<std::pair<std::string, Error>> load_errors() const;
  /// The records that are not running (ended, or in state error; not the
  /// empty slots), in bgId order; with `owner`, only that user's.
  std::vector<EndedEntry> ended_entries(std::optional<uid_t> owner = std::nullopt) const;
  /// The running records only, in bgId order, and how many have ended
  /// (state exited or error; empty slots are not counted). Cheap with many
  /// ended records: those are counted, not copied; `cpu` as for list(), or
  /// 0 with CpuFigure::skip (for an answer that does not show it).
  /// With `owner`, only the records that user started.
  std::vector<CommandStatus> list_running(std::size_t* ended = nullptr,
                                          std::optional<uid_t> owner = std::nullopt,
                                          CpuFigure cpu = CpuFigure::sample) const;
  SupervisorInfo info() const;
  /// The records whose start an earlier daemon published but never let go
  /// (it died between the two): nothing of them ran, and open() removed
  /// them (a slot's earlier run, which the start was replacing, is back).
  const std::vector<std::string>& starts_never_let_go() const;

  /// Blocks the calling thread until `id` has ended or `timeout` passed.
  /// For library users and tests; the FUSE side parks requests instead.
  std::optional<CommandStatus> wait(const std::string& id, std::chrono::milliseconds timeout);
  /// stop() then wait().
  std::optional<CommandStatus> stop_and_wait(const std::string& id, std::chrono::milliseconds timeout);

  /// Listeners run on the event thread, in subscription order.
  /// `output` events of a running command come only while someone follows
  /// its output (a write nobody follows wakes no thread): a subscriber that
  /// wants them calls want_output(id) once it is ready for them (after
  /// making itself known to `follows`), then looks at the output once, for
  /// what came before; `follows` says, until it returns false, that it still
  /// wants them. Output written before the record is watched (early output)
  /// is announced once, followed or not.
  std::uint64_t subscribe(Listener l, OutputInterest follows = {});
  void unsubscribe(std::uint64_t token);
  /// See subscribe(). Any thread; an unknown id is ignored.
  void want_output(const std::string& id);

  /// One-shot timer on the event thread.
  std::uint64_t add_timer(Clock::time_point when, TimerCallback cb);
  /// True when the timer was cancelled before it ran.
  bool cancel_timer(std::uint64_t token);
  /// Runs `fn` on the event thread soon.
  void post(std::function<void()> fn);
  /// Runs `fn` soon on the worker pool (slow work that must not delay the
  /// event thread: building a big answer, file I/O). Tasks posted while the
  /// supervisor is destroyed may be dropped.
  void post_work(std::function<void()> fn);

  /// Masks the global secrets and those of command `id` (empty id: global only).
  std::string mask(std::string_view text, const std::string& id = "") const;
  /// The secret values that apply to command `id` (global ones included).
  std::vector<std::string> secrets(const std::string& id) const;
  /// How many bytes at a cut of a log (a live stream's unfinished line, a
  /// gap's edges) are held or masked whatever they are: the global secrets'
  /// reach (secrets.hpp, secret_start_at_end).
  std::size_t secret_blind() const;

 private:
  struct Impl;
  explicit Supervisor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sup
