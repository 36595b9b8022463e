#pragma once
// The supervisor's insides, shared by the files that implement it (one part
// each: state_loader, start_transaction, exit_watcher, readiness,
// record_removal, record_snapshot) and by the facade, supervisor.cpp.
// Not for users of the library: they see supervisor.hpp.
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

#include "supervisor/cgroup.hpp"
#include "supervisor/clock.hpp"
#include "supervisor/cpu_sampler.hpp"
#include "supervisor/event_loop.hpp"
#include "supervisor/live_records.hpp"
#include "supervisor/record_listing.hpp"
#include "supervisor/monitor_launcher.hpp"
#include "supervisor/reader_probes.hpp"
#include "supervisor/readiness_probe.hpp"
#include "supervisor/own_mount.hpp"
#include "supervisor/record.hpp"
#include "supervisor/retention.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/spare_folders.hpp"
#include "supervisor/supervisor.hpp"
#include "supervisor/unique_fd.hpp"
#include "supervisor/work_pool.hpp"

namespace sup {

struct Supervisor::Impl {
  SupervisorOptions opts;
  OwnMount own_mount;       // opts.own_mount, its folder resolved: never looked into
  std::string procs_dir;
  std::string staging_dir;  // starts and removals in progress: never in procs/, whose names are the users'
  std::string started_at = iso_now();
  UniqueFd lock_fd;
  UniqueFd inotify;

  mutable std::mutex mu;
  std::condition_variable changed;                  // a record ended or vanished
  std::map<std::string, Record> records;            // guarded by mu; changed only by put_record, drop_record
  LiveRecords live;                                 // what list_running() walks; guarded by mu
  RecordListing listing;                            // what entries() copies; guarded by mu
  // Counts the changes of what a listing shows of `records` (an id, its
  // serial, owner or emptiness): bumped at every insert and erase; guarded by mu.
  std::uint64_t listing_gen = 0;
  std::vector<std::pair<std::string, Error>> load_errors;  // set by load()
  std::set<std::string> reserved;                   // ids being started; guarded by mu
  std::map<std::string, std::uint64_t> serials;     // a name keeps its serial until its record is removed; guarded by mu
  std::uint64_t next_serial = 1;                    // guarded by mu
  std::uint64_t counter = 1;                        // next auto id; guarded by mu
  std::map<int, std::string> wd_ids;                // inotify wd of a log -> id; guarded by mu
  std::map<int, std::string> dir_wd_ids;            // inotify wd of a folder -> id; guarded by mu

  EndedRecords ended_index;                         // ended records by end time; guarded by mu
  std::size_t running = 0;                          // records running; guarded by mu
  std::size_t starting = 0;                         // starts between claim and commit; guarded by mu
  std::unordered_map<uid_t, std::size_t> active_by_uid;  // running + starting, per owner; guarded by mu
  std::uint64_t counter_on_disk = 0;                // the `counter` file's value; guarded by mu
  std::uint64_t retention_timer = 0;                // the age limit's one-shot timer; guarded by mu
  std::optional<EndedRecords::Millis> retention_due;  // when it fires; guarded by mu
  std::uint64_t retention_gen = 0;                  // which arming is current; guarded by mu
  std::atomic<std::uint64_t> del_seq{0};            // makes staging/del-* names unique
  // N of the next command cgroup's name (cmd-ID-N): never used twice, across
  // daemons too (it starts past the clock in ms and past every cgroup taken
  // back at load), so no cgroup of an ended record shares a later start's name.
  std::atomic<std::uint64_t> cgroup_serial{0};

  mutable CpuSampler cpu;

  std::mutex listeners_mu;
  std::vector<std::pair<std::uint64_t, Listener>> listeners;  // guarded by listeners_mu
  std::vector<std::pair<std::uint64_t, OutputInterest>> output_interests;  // guarded by listeners_mu
  std::uint64_t next_token = 1;                               // guarded by listeners_mu

  std::map<std::string, std::shared_ptr<ReadinessProbe>> probes;  // loop thread only
  std::unique_ptr<LogWatches> log_watches;                         // loop thread only; made with the loop
  std::unique_ptr<ReaderProbes> reader_probes;                     // made with the loop

  struct Starting;
  std::map<std::uint64_t, std::shared_ptr<Starting>> starts;  // loop thread only
  std::uint64_t next_start = 1;                     // guarded by mu
  bool closing = false;                             // cancel_starts() ran; guarded by mu
  std::size_t starts_left = 0;                      // closing: starts under way (loop thread sets, under mu)
  std::condition_variable starts_ended;             // closing: one more start has ended
  std::vector<std::string> never_let_go;           // set by the load, then read only (starts_never_let_go)

  // Cgroup tracking: where new commands' cgroups go (none: process trees), and why not.
  std::optional<CgroupHierarchy> cgroups;
  std::string no_cgroup;

  std::vector<std::function<void()>> tidying;  // tidy_later()'s tasks; loop thread only

  std::unique_ptr<MonitorLauncher> launcher;
  std::unique_ptr<SpareFolders> spares;  // before work: its refills run there
  std::unique_ptr<WorkPool> work;   // before loop: its tasks may post to the loop
  std::unique_ptr<EventLoop> loop;  // last: destroyed first, so no callback outlives the rest

  std::string dir_of(const std::string& id) const { return procs_dir + "/" + id; }
  /// Whether the record's folder holds a file NAME (on disk, now).
  bool record_has(const std::string& id, const char* name) const {
    return ::access((dir_of(id) + "/" + name).c_str(), F_OK) == 0;
  }
  /// Where a start of `id` (or a new slot) is prepared before it is renamed into procs/.
  std::string start_dir(const std::string& id) const { return staging_dir + "/new-" + id; }
  /// A fresh name to rename a record's folder to before deleting it.
  std::string deletion_dir() { return staging_dir + "/del-" + std::to_string(del_seq++); }
  /// Where a record a start replaces waits until that start is known to
  /// have run (a daemon that dies meanwhile gives it back at its load).
  std::string held_dir(const std::string& id) { return staging_dir + "/held-" + std::to_string(del_seq++) + "-" + id; }

  std::uint64_t serial_for(const std::string& id) {  // needs mu
    auto [it, fresh] = serials.emplace(id, next_serial);
    if (fresh) ++next_serial;
    return it->second;
  }

  void emit(Event::Kind kind, const std::string& id, std::uint64_t serial = 0) {
    loop->post([this, kind, id, serial] { dispatch(Event{kind, id, serial}); });
  }
  void dispatch(const Event& e) {
    std::vector<Listener> ls;
    {
      std::lock_guard g(listeners_mu);
      for (auto& [t, l] : listeners) ls.push_back(l);
    }
    for (auto& l : ls) l(e);
  }

  // The global secrets' reach: held or masked at a cut whatever the bytes
  // are (secret_start_at_end), so that no user learns them from what is.
  std::size_t secret_blind() const { return secret_reach(opts.secrets); }
  std::vector<std::string> secrets_of(const Record* r) const {
    std::vector<std::string> s = opts.secrets;
    if (r && r->spec)
      for (auto& [k, v] : r->spec->secret_env) s.push_back(v);
    return s;
  }

  // record_snapshot.cpp
  CommandStatus snapshot(const Record& r) const;  // needs mu

  // exit_watcher.cpp
  void watch_running(Record& r);                  // needs mu
  void watch_log(Record& r);                      // needs mu; no-op while the log does not exist yet
  void watch_tail(Record& r, const std::string& name);  // needs mu; a tail segment's index
  // Output events of a running command come while someone follows its
  // output: a reader of a follow view, a poll, a log condition (a probe of
  // the record's or of a reader). The first want_output() makes its watches
  // report writes; after a write that nobody followed they go quiet again.
  void arm_output(Record& r, bool on);                  // needs mu
  void want_output(const std::string& id);              // takes mu
  bool output_followed(const std::string& id);          // loop thread; without mu
  void quiet_unfollowed(const std::string& id);         // loop thread; takes mu
  /// `scanned`: called again once finish_unknown has run (on the worker pool).
  void on_monitor_exit(const std::string& id, bool scanned = false);
  /// Runs `task` on a work thread about a millisecond from now, with the
  /// others due then (called on the loop thread): what an end leaves to
  /// tidy, off the path of its news and off the event thread.
  void tidy_later(std::function<void()> task);
  /// Once the ended record's monitor (`pidfd`) is gone: destroys its cgroup
  /// if the monitor left it (any thread; never blocks the loop on cgroupfs).
  void await_monitor_gone(UniqueFd pidfd, const std::string& cgroup);
  void on_inotify();
  /// monitor.json was written again (restart policy): the latest run, or the delay before it.
  void on_monitor_record(const std::string& id);
  /// Takes what r's monitor.json says now; true for a run the record did not know. Needs mu.
  bool apply_monitor_record(Record& r);
  /// r's monitor marked a stop under way (kStoppingFile: a timeout's, or
  /// one that lasts): a running or paused record is stopping. Needs mu.
  static void note_monitor_stopping(Record& r) { r.state = transition(r.state, CommandEvent::timed_out).next; }
  void finish_unknown(const std::string& dir, const MonitorInfo* m, const std::vector<std::string>& env_marks);

  // state_loader.cpp
  Status load();
  void load_record(const std::string& id);
  /// At load, for a record whose monitor.json is torn: its cgroup (by its
  /// name in the subtree) and its live monitor (the process holding its ctl
  /// FIFO), where they are found.
  void recover_monitor(const std::string& id, MonitorInfo* m) const;
  /// At load: ends and removes the commands' cgroups no record owns.
  void sweep_stray_cgroups();
  /// A running command taken back was paused by the daemon before: its
  /// cgroup is frozen, or (no cgroup) its first process is stopped.
  static bool paused_before(const MonitorInfo& m);

  // record_table.cpp: the only ways a record enters or leaves `records`.
  /// Puts `r` under `id`, in the place of any record there (moved to
  /// `replaced` when given, else dropped). Needs mu.
  std::map<std::string, Record>::iterator put_record(const std::string& id, Record&& r,
                                                     std::optional<Record>* replaced = nullptr);
  void drop_record(std::map<std::string, Record>::iterator it);  // needs mu

  // record_removal.cpp
  void note_ended(const Record& r);                       // needs mu
  void save_counter_for(const std::string& removed_id);    // needs mu
  /// Unpublishes record `it` (renamed to a staging/del-* folder, which is returned
  /// for remove_tree outside the lock); empty on failure, with `err` set.
  std::string detach(std::map<std::string, Record>::iterator it, Status* err);  // needs mu
  void prune();                                            // no lock held
  void arm_retention_timer();                              // needs mu

  // readiness.cpp
  void start_probe(const std::string& id);  // loop thread
  /// The condition the record's own probe of `id` checks, while it runs (loop thread).
  std::optional<ReadyCondition> record_probe_condition(const std::string& id);
  /// `news_later`: the ready event is posted, not dispatched at once.
  void mark_ready(const std::string& id, const ReadyMatch& m, bool news_later = false);  // loop thread
  /// A reader's probe found `c` holding: the record's too when it is its condition (loop thread).
  void reader_condition_held(const std::string& id, const ReadyCondition& c, const ReadyMatch& m);
  /// The log grew or the folder changed: every probe of `id` looks (loop thread).
  void probe_output(const std::string& id);
  /// `id` ended: last lines are matched, probing stops (loop thread).
  void probe_finish(const std::string& id);
  /// `id`, taken back ended and not ready: its whole output (or its
  /// readyFd's note) is looked at once for its condition (work pool).
  void settle_ready(const std::string& id);
  void save_ready(const Record& r) const;   // needs mu

  // command_input.cpp
  /// Watches `pipe` (loop thread) until it has room, then emits stdin_writable for `id`.
  void wait_for_stdin_room(const std::string& id, std::shared_ptr<StdinPipe> pipe);
  /// The pipe a write to `id`'s input goes into (opened at the first write).
  Result<std::shared_ptr<StdinPipe>> input_of(const std::string& id);
  /// Lets go of r's stdin pipe; its watch, if armed, is ended on the loop thread.
  void drop_stdin(Record& r);  // needs mu

  // start_transaction.cpp: start_async, once handed to the loop (loop thread).
  /// Claims s.spec's name (or a fresh id) and a place under max_running
  /// (none with s.queue_full: it is to be queued). No lock held.
  std::optional<Error> claim(Starting& s, StartMode mode);
  /// Why `owner` may not start one more now (max_running, max_running_per_user). Needs mu.
  std::optional<Error> no_place(uid_t owner) const;
  /// had_place: claim() took a place (false for a request it queued). No lock held.
  void unreserve(const std::string& id, uid_t owner, bool had_place = true);
  /// The rest of a start once claimed (and recorded): the cgroup, the job to
  /// the monitor, then the event loop. From start_async, or start_queued.
  void launch(const std::shared_ptr<Starting>& s, std::map<std::string, std::string> env, StartDone done,
              std::stop_token stop);

  // start_queue.cpp: commands queued past max_running.
  std::uint64_t next_queue_seq = 1;            // guarded by mu
  std::map<std::uint64_t, std::string> queue;  // queue_seq -> id of the queued records; guarded by mu
  /// Whether a queued record waits that `owner`'s next one would have to wait behind. Needs mu.
  bool queued_ahead(uid_t owner) const;
  /// Records s (claimed with queue_full, spec.json in s.tmp_dir) as queued: publishes it. No lock held.
  Result<CommandStatus> enqueue(Starting& s);
  /// Starts queued records, oldest first, while there are places (loop thread).
  void start_queued();
  /// Ends queued record `id` that never ran: stopped (`stopped`) or its start failed (`why`). No lock held.
  void end_queued(const std::string& id, const Error& why, bool stopped);
  /// Puts back in the queue a queued record whose start was called off
  /// before its exec (the supervisor closes); false when it cannot. No lock held.
  bool requeue(const std::string& id);
  /// Ends a queued record as stopped, under mu (Supervisor::stop). Needs mu.
  void stop_queued(Record& r);
  /// Writes how a queued record ended and ends it. Needs mu.
  void finish_queued(Record& r, const ExitInfo& e);
  /// At load: whether record `r` (spec read, not ended) is queued; then its place is kept. Needs mu.
  bool load_queued(Record& r);
  void start_begin(const std::shared_ptr<Starting>& s);
  void arm_start_timer(Starting& s, const char* report);
  void start_report(std::uint64_t token);
  Status start_publish(Starting& s, pid_t pid);
  void start_commit(std::uint64_t token);
  void start_fail(std::uint64_t token, Error e);
  std::shared_ptr<Starting> start_take(std::uint64_t token);
};

/// A start's outcome when it was called off, or when the supervisor closes.
Error interrupted_error();
Error shutting_down_error();

}  // namespace sup
