#include "supervisor/supervisor.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "supervisor/auto_id.hpp"
#include "supervisor/cgroup.hpp"
#include "supervisor/cgroup_limits.hpp"
#include "supervisor/clock.hpp"
#include "supervisor/cpu_sampler.hpp"
#include "supervisor/event_loop.hpp"
#include "supervisor/files.hpp"
#include "supervisor/monitor_launcher.hpp"
#include "supervisor/proc_tree.hpp"
#include "supervisor/reader_probes.hpp"
#include "supervisor/readiness_probe.hpp"
#include "supervisor/record_files.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/unique_fd.hpp"
#include "supervisor/utf8.hpp"
#include "supervisor/work_pool.hpp"

extern char** environ;

namespace sup {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxInlineScript = 100 * 1024;

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./=:,+@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

// Cut at most `n` bytes without splitting a UTF-8 sequence.
std::string utf8_prefix(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t cut = n;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut);
}

// What execvp would run: a found, executable file, else why not.
Status check_executable(const std::string& argv0, const std::string& cwd, const std::string& path_var) {
  auto check = [](const std::string& p) -> int {
    struct stat st{};
    if (::stat(p.c_str(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EACCES;
    if (::access(p.c_str(), X_OK) != 0) return errno;
    return 0;
  };
  if (argv0.find('/') != std::string::npos) {
    std::string p = argv0[0] == '/' ? argv0 : cwd + "/" + argv0;
    if (int e = check(p)) return error_from_errno(e, "cannot execute '" + argv0 + "'");
    return Ok{};
  }
  int worst = ENOENT;
  size_t i = 0;
  std::string pv = path_var.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_var;
  while (i <= pv.size()) {
    size_t j = pv.find(':', i);
    if (j == std::string::npos) j = pv.size();
    std::string dir = pv.substr(i, j - i);
    if (dir.empty()) dir = ".";
    if (dir[0] != '/') dir = cwd + "/" + dir;
    int e = check(dir + "/" + argv0);
    if (e == 0) return Ok{};
    if (e == EACCES) worst = EACCES;
    i = j + 1;
  }
  if (worst == ENOENT) return Error{Errc::not_found, "cannot execute '" + argv0 + "': not found in PATH"};
  return error_from_errno(worst, "cannot execute '" + argv0 + "'");
}

}  // namespace

std::string default_monitor_path() {
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "sbxfs-monitor";
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
#ifdef SBX_MONITOR_BUILD_PATH
  return SBX_MONITOR_BUILD_PATH;
#else
  return "sbxfs-monitor";
#endif
}

struct Record {
  std::string id;
  bool slot = false;
  std::optional<StartSpec> spec;
  std::optional<Error> error;
  uid_t owner_uid = 0;
  pid_t owner_sid = 0;
  MonitorInfo monitor;
  bool ended = false;
  ExitInfo exit;
  UniqueFd pidfd;
  int log_wd = -1;   // inotify: the log grew
  int dir_wd = -1;   // inotify: exit.json appeared, `dropped` was created
  bool truncated = false;        // `dropped` exists: output past log_max
  std::uint64_t dropped = 0;     // its size, once ended (while running: read live)
  std::optional<ReadyCondition> ready_cond;
  bool ready = false;
  std::string ready_at;
  bool scanning = false;  // its monitor left no exit.json: /proc is being searched for what is left
  bool paused = false;    // signal STOP (with a cgroup: frozen) and no CONT since
};

/// What in a process's environment marks it as one of `r`'s: SBX_BGID and
/// the request's env overlay (the daemon's SBX_MOUNT names its mount).
/// Empty without an overlay: SBX_BGID alone is not unique across daemons.
std::vector<std::string> env_marks(const Record& r) {
  if (!r.spec || r.spec->env.empty()) return {};
  std::vector<std::string> marks = {"SBX_BGID=" + r.id};
  for (const auto& [k, v] : r.spec->env)
    if (!r.spec->secret_env.count(k)) marks.push_back(k + "=" + v);
  return marks;
}

struct Supervisor::Impl {
  SupervisorOptions opts;
  std::string procs_dir;
  std::string staging_dir;  // starts and removals in progress: never in procs/, whose names are the users'
  std::string started_at = iso_now();
  UniqueFd lock_fd;
  UniqueFd inotify;

  mutable std::mutex mu;
  std::condition_variable changed;                  // a record ended or vanished
  std::map<std::string, Record> records;            // guarded by mu
  std::set<std::string> reserved;                   // ids being started; guarded by mu
  std::map<std::string, std::uint64_t> serials;     // never shrinks; guarded by mu
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

  mutable CpuSampler cpu;

  std::mutex listeners_mu;
  std::vector<std::pair<std::uint64_t, Listener>> listeners;  // guarded by listeners_mu
  std::uint64_t next_token = 1;                               // guarded by listeners_mu

  std::map<std::string, std::shared_ptr<ReadinessProbe>> probes;  // loop thread only
  std::unique_ptr<ReaderProbes> reader_probes;                     // made with the loop

  struct Starting;
  std::map<std::uint64_t, std::shared_ptr<Starting>> starts;  // loop thread only
  std::uint64_t next_start = 1;                     // guarded by mu
  bool closing = false;                             // cancel_starts() ran; guarded by mu

  // Cgroup tracking: where new commands' cgroups go (none: process trees), and why not.
  std::optional<CgroupHierarchy> cgroups;
  std::string no_cgroup;

  std::unique_ptr<MonitorLauncher> launcher;
  std::unique_ptr<WorkPool> work;   // before loop: its tasks may post to the loop
  std::unique_ptr<EventLoop> loop;  // last: destroyed first, so no callback outlives the rest

  std::string dir_of(const std::string& id) const { return procs_dir + "/" + id; }
  /// Where a start of `id` (or a new slot) is prepared before it is renamed into procs/.
  std::string start_dir(const std::string& id) const { return staging_dir + "/new-" + id; }
  /// A fresh name to rename a record's folder to before deleting it.
  std::string deletion_dir() { return staging_dir + "/del-" + std::to_string(del_seq++); }

  std::uint64_t serial_for(const std::string& id) {  // needs mu
    auto [it, fresh] = serials.emplace(id, next_serial);
    if (fresh) ++next_serial;
    return it->second;
  }

  void emit(Event::Kind kind, const std::string& id) {
    loop->post([this, kind, id] { dispatch(Event{kind, id}); });
  }
  void dispatch(const Event& e) {
    std::vector<Listener> ls;
    {
      std::lock_guard g(listeners_mu);
      for (auto& [t, l] : listeners) ls.push_back(l);
    }
    for (auto& l : ls) l(e);
  }

  std::vector<std::string> secrets_of(const Record* r) const {
    std::vector<std::string> s = opts.secrets;
    if (r && r->spec)
      for (auto& [k, v] : r->spec->secret_env) s.push_back(v);
    return s;
  }

  CommandStatus snapshot(const Record& r) const;  // needs mu
  void watch_running(Record& r);                  // needs mu
  void watch_log(Record& r);                      // needs mu; no-op while the log does not exist yet
  /// `scanned`: called again once finish_unknown has run (on the worker pool).
  void on_monitor_exit(const std::string& id, bool scanned = false);
  void on_inotify();
  Status load();
  void load_record(const std::string& id);
  void finish_unknown(const std::string& dir, const MonitorInfo* m, const std::vector<std::string>& env_marks);
  void note_ended(const Record& r);                       // needs mu
  void save_counter_for(const std::string& removed_id);    // needs mu
  /// Unpublishes record `it` (renamed to a staging/del-* folder, which is returned
  /// for remove_tree outside the lock); empty on failure, with `err` set.
  std::string detach(std::map<std::string, Record>::iterator it, Status* err);  // needs mu
  void prune();                                            // no lock held
  void arm_retention_timer();                              // needs mu
  void start_probe(const std::string& id);  // loop thread
  void mark_ready(const std::string& id);   // loop thread
  void save_ready(const Record& r) const;   // needs mu

  // start_async, once handed to the loop (loop thread).
  /// Claims s.spec's name (or a fresh id) and a place under max_running. No lock held.
  std::optional<Error> claim(Starting& s, StartMode mode);
  void unreserve(const std::string& id, uid_t owner);  // no lock held
  void start_begin(const std::shared_ptr<Starting>& s);
  void arm_start_timer(Starting& s, const char* report);
  void start_report(std::uint64_t token);
  Status start_publish(Starting& s, pid_t pid);
  void start_commit(std::uint64_t token);
  void start_fail(std::uint64_t token, Error e);
  std::shared_ptr<Starting> start_take(std::uint64_t token);
};

void Supervisor::Impl::save_ready(const Record& r) const {
  json j = {{"condition", r.ready_cond ? r.ready_cond->to_json() : json(nullptr)},
            {"ready", r.ready},
            {"readyAt", r.ready_at.empty() ? json(nullptr) : json(r.ready_at)}};
  // No fsync: readiness is re-probed after a crash if this is lost.
  (void)write_file_atomic(dir_of(r.id) + "/ready.json", j.dump() + "\n");
}

void Supervisor::Impl::start_probe(const std::string& id) {
  std::optional<ReadyCondition> cond;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || it->second.ended || it->second.slot || it->second.ready) return;
    cond = it->second.ready_cond;
  }
  probes.erase(id);
  if (!cond) return;
  probes[id] = ReadinessProbe::start(*loop, *cond, dir_of(id) + "/log", [this, id] { mark_ready(id); });
}

void Supervisor::Impl::mark_ready(const std::string& id) {
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || it->second.ready) return;
    it->second.ready = true;
    it->second.ready_at = iso_now();
    save_ready(it->second);
  }
  // Dropping the probe here is safe: it is done and touches nothing after on_ready.
  loop->post([this, id] { if (auto it = probes.find(id); it != probes.end() && it->second) probes.erase(it); });
  dispatch(Event{Event::Kind::ready, id});
}

CommandStatus Supervisor::Impl::snapshot(const Record& r) const {
  CommandStatus s;
  s.bg_id = r.id;
  auto it = serials.find(r.id);
  s.serial = it == serials.end() ? 0 : it->second;
  s.owner_uid = r.owner_uid;
  s.owner_sid = r.owner_sid;
  if (r.spec) s.client = r.spec->requester_client;
  std::string dir = dir_of(r.id);
  s.log_file = dir + "/log";
  s.stdout_file = dir + "/stdout";
  s.stderr_file = dir + "/stderr";
  if (r.error) {
    s.state = "error";
    s.error = r.error;
  } else if (r.slot) {
    s.state = "empty";
    s.named = true;
  } else if (r.ended) {
    s.state = "exited";
  } else {
    s.state = r.paused ? "paused" : "running";
    s.running = true;
  }
  if (r.spec) {
    auto secrets = secrets_of(&r);
    const StartSpec& sp = *r.spec;
    s.named = !sp.name.empty();
    s.note = mask_secrets(sp.note, secrets);
    std::string full;
    if (sp.shell) {
      full = *sp.shell;
    } else {
      for (auto& a : sp.argv) full += (full.empty() ? "" : " ") + shell_quote(a);
    }
    s.cmd_full = mask_secrets(full, secrets);
    s.cmd = utf8_prefix(s.cmd_full, 120);
    for (auto& a : sp.effective_argv()) s.argv.push_back(mask_secrets(a, secrets));
    s.cwd = sp.cwd;
  }
  s.pid = r.monitor.pid;
  s.started_at = r.monitor.started_at;
  if (r.monitor.monitor_pid > 0) s.tracking = r.monitor.cgroup.empty() ? "proctree" : "cgroup";
  s.cgroup = r.monitor.cgroup;
  if (r.ended) {
    s.exit_code = r.exit.exit_code;
    s.signal = r.exit.signal;
    s.end_reason = r.exit.end_reason;
    s.finished_at = r.exit.finished_at;
    s.timed_out = r.exit.timed_out;
    s.end_note = r.exit.end_note;
    s.output_lost = r.exit.output_lost;
  }
  if (r.truncated) {
    s.truncated = true;
    s.dropped_bytes = r.ended ? r.dropped : dropped_bytes(dir).value_or(0);
  }
  if (r.ready_cond) {
    s.ready_when = r.ready_cond->describe();
    s.ready = r.ready;
    s.ready_at = r.ready_at;
  }
  return s;
}

void Supervisor::Impl::note_ended(const Record& r) {
  std::optional<EndedRecords::Millis> at = iso_to_ms(r.exit.finished_at);
  if (!at) {
    // A torn or missing exit record: its folder's last change is the best
    // guess (never "long ago", which the age limit would remove at once).
    struct stat st{};
    at = ::stat(dir_of(r.id).c_str(), &st) == 0
             ? static_cast<EndedRecords::Millis>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000
             : now_ms();
  }
  ended_index.add(r.id, *at);
}

void Supervisor::Impl::save_counter_for(const std::string& removed_id) {
  // Ids are never reused: the next one is past the highest folder on load,
  // so only removing a record can lower that; the counter on disk must stay
  // past every removed automatic id (written rarely: the oldest go first).
  auto n = parse_auto_id(removed_id);
  if (!n || counter_on_disk > *n) return;
  if (write_file_atomic(opts.state_dir + "/counter", std::to_string(counter) + "\n")) counter_on_disk = counter;
}

std::string Supervisor::Impl::detach(std::map<std::string, Record>::iterator it, Status* err) {
  const std::string id = it->first;
  if (it->second.spec && !it->second.spec->script_file.empty()) ::unlink(it->second.spec->script_file.c_str());
  save_counter_for(id);
  // Rename first, so a crash mid-delete leaves no half record; a unique
  // name, so no later record of the same name collides with the delete.
  std::string del = deletion_dir();
  if (::rename(dir_of(id).c_str(), del.c_str()) != 0) {
    *err = error_from_errno(errno, "rename " + dir_of(id));
    return {};
  }
  ended_index.erase(id);
  records.erase(it);
  cpu.forget(id);
  return del;
}

void Supervisor::Impl::prune() {
  std::vector<std::string> removed, dirs;
  {
    std::lock_guard g(mu);
    for (const std::string& id : ended_index.due(now_ms(), opts.retention)) {
      auto it = records.find(id);
      if (it == records.end() || reserved.count(id)) continue;  // a named start is replacing it
      Status err = Ok{};
      std::string del = detach(it, &err);
      if (del.empty()) {
        ended_index.erase(id);  // cannot rename it: keep it, stop trying
        continue;
      }
      removed.push_back(id);
      dirs.push_back(std::move(del));
    }
    arm_retention_timer();
  }
  // Unpublished already (renamed): the files go on the worker pool.
  for (std::string& d : dirs) work->post([d = std::move(d)] { remove_tree(d); });
  if (removed.empty()) return;
  changed.notify_all();
  for (const std::string& id : removed) emit(Event::Kind::removed, id);
}

void Supervisor::Impl::arm_retention_timer() {
  // One one-shot timer at the next record's expiry, never a periodic one:
  // an idle supervisor does not wake up.
  const std::optional<EndedRecords::Millis> due = ended_index.next_expiry(opts.retention);
  if (due == retention_due) return;
  if (retention_timer) loop->cancel_timer(retention_timer);
  retention_timer = 0;
  retention_due = due;
  if (!due) return;
  const auto delay = std::chrono::milliseconds(std::max<EndedRecords::Millis>(0, *due - now_ms()) + 1);
  const std::uint64_t gen = ++retention_gen;
  retention_timer = loop->add_timer(Clock::now() + delay, [this, gen] {
    {
      std::lock_guard g(mu);
      if (gen == retention_gen) {  // else re-armed meanwhile: that timer is the one
        retention_timer = 0;
        retention_due.reset();
      }
    }
    prune();
  });
}

void Supervisor::Impl::watch_log(Record& r) {
  const int wd = ::inotify_add_watch(inotify.get(), (dir_of(r.id) + "/log").c_str(), IN_MODIFY);
  if (wd >= 0) {
    r.log_wd = wd;
    wd_ids[wd] = r.id;
  }
}

void Supervisor::Impl::watch_running(Record& r) {
  std::string id = r.id;
  const std::string log = dir_of(id) + "/log";
  // The end is known when exit.json is renamed into place, a little before
  // the monitor itself has exited (the pidfd below still catches a monitor
  // that dies without writing it). The folder first: the monitor creates
  // `log` just after the start is reported, and its IN_CREATE then adds the
  // log's watch if the log was not there yet.
  int dwd = ::inotify_add_watch(inotify.get(), dir_of(id).c_str(), IN_MOVED_TO | IN_CREATE | IN_ONLYDIR);
  if (dwd >= 0) {
    r.dir_wd = dwd;
    dir_wd_ids[dwd] = id;
  }
  watch_log(r);
  if (dropped_bytes(dir_of(id))) r.truncated = true;  // created before the watch
  // Output written before the watch existed is announced too.
  struct stat st{};
  if (::stat(log.c_str(), &st) == 0 && st.st_size > 0) emit(Event::Kind::output, id);
  int fd = open_pidfd(r.monitor.monitor_pid);
  // Out of file descriptors is no end: the exit.json watch still tells it.
  if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOMEM) && r.dir_wd >= 0) return;
  if (fd < 0 || process_start_time(r.monitor.monitor_pid) != r.monitor.monitor_start) {
    if (fd >= 0) ::close(fd);
    loop->post([this, id] { on_monitor_exit(id); });  // gone already
    return;
  }
  r.pidfd.reset(fd);
  loop->watch(fd, [this, id] { on_monitor_exit(id); });
}

void Supervisor::Impl::finish_unknown(const std::string& dir, const MonitorInfo* m,
                                      const std::vector<std::string>& env_marks) {
  // The monitor is gone without a word: don't leave its command behind
  // unseen. Its relay is gone too, so the command can only be ended.
  std::size_t killed = 0;
  if (m && !m->cgroup.empty()) {
    // Every member, however far it went (setsid, double forks, a new environment).
    const Cgroup cg(m->cgroup);
    killed = cg.members().size();
    cg.kill();
    cg.wait_empty(std::chrono::seconds(10));
    cg.remove();
  } else if (m && m->pid > 0) {
    killed = kill_orphaned_tree(m->pid, m->pid_start, env_marks);
  }
  const std::string note = "its monitor" + (m ? " (pid " + std::to_string(m->monitor_pid) + ")" : std::string()) +
                           " ended without recording how the command ended; " + std::to_string(killed) +
                           " process(es) left of the command were killed";
  json j = {{"exitCode", -1}, {"signal", nullptr}, {"endReason", "unknown"}, {"timedOut", false},
            {"finishedAt", iso_now()}, {"oom", false}, {"endNote", note}};
  (void)write_file_atomic(dir + "/exit.json", j.dump() + "\n");
}

void Supervisor::Impl::on_monitor_exit(const std::string& id, bool scanned) {
  std::string dir = dir_of(id);
  MonitorInfo m;
  std::vector<std::string> marks;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || it->second.ended || it->second.slot) return;
    if (it->second.scanning && !scanned) return;  // the scan's end calls again
    m = it->second.monitor;
    marks = env_marks(it->second);
  }
  // A command that ended before its probe ran still gets its log checked.
  if (!scanned && !probes.count(id)) start_probe(id);
  if (auto pr = probes.find(id); pr != probes.end()) {
    auto probe = pr->second;  // finish() may mark ready, which erases it later
    probe->finish();
    probes.erase(id);
  }
  reader_probes->finish(id);
  auto text = read_file(dir + "/exit.json");
  if ((!text.ok() || !text.value()) && !scanned) {
    // Its processes are looked for in /proc: on the worker pool, not here.
    {
      std::lock_guard g(mu);
      auto it = records.find(id);
      if (it == records.end()) return;
      it->second.scanning = true;
      if (it->second.pidfd) loop->unwatch(it->second.pidfd.get());  // readable until closed
    }
    work->post([this, id, dir, m, marks] {
      finish_unknown(dir, &m, marks);
      loop->post([this, id] { on_monitor_exit(id, true); });
    });
    return;
  }
  const std::optional<std::uint64_t> dropped = dropped_bytes(dir);  // final: the monitor is done
  ExitInfo info;
  std::optional<Error> err;
  if (text.ok() && text.value()) {
    auto e = parse_exit(*text.value());
    if (e) info = e.value();
    else err = e.error();
  } else {
    info.exit_code = -1;
    info.end_reason = "unknown";
    info.finished_at = iso_now();
  }
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || it->second.ended) return;
    Record& r = it->second;
    if (r.pidfd) loop->unwatch(r.pidfd.get());
    r.pidfd.reset();
    if (r.log_wd >= 0) {
      ::inotify_rm_watch(inotify.get(), r.log_wd);
      wd_ids.erase(r.log_wd);
      r.log_wd = -1;
    }
    if (r.dir_wd >= 0) {
      ::inotify_rm_watch(inotify.get(), r.dir_wd);
      dir_wd_ids.erase(r.dir_wd);
      r.dir_wd = -1;
    }
    r.ended = true;
    r.exit = info;
    if (dropped) {
      r.truncated = true;
      r.dropped = *dropped;
    }
    if (err) r.error = err;
    --running;
    if (--active_by_uid[r.owner_uid] == 0) active_by_uid.erase(r.owner_uid);
    note_ended(r);
  }
  cpu.forget(id);
  // The monitor removes the cgroup before its exit.json; one it could not remove goes now.
  if (!m.cgroup.empty() && Cgroup(m.cgroup).exists())
    work->post([cg = Cgroup(m.cgroup)] {
      cg.kill();
      cg.wait_empty(std::chrono::seconds(10));
      cg.remove();
    });
  changed.notify_all();
  // The last output may have been written just before the exit.
  dispatch(Event{Event::Kind::output, id});
  dispatch(Event{Event::Kind::ended, id});
  prune();  // after the news: a reader told of the end may still find the record
}

void Supervisor::Impl::on_inotify() {
  alignas(inotify_event) char buf[8192];
  std::set<std::string> grown, exited;
  for (;;) {
    ssize_t n = ::read(inotify.get(), buf, sizeof buf);
    if (n <= 0) break;
    std::lock_guard g(mu);
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      if (auto it = wd_ids.find(ev->wd); it != wd_ids.end()) {
        grown.insert(it->second);
      } else if (auto d = dir_wd_ids.find(ev->wd); d != dir_wd_ids.end() && ev->len > 0) {
        if ((ev->mask & IN_MOVED_TO) && std::strcmp(ev->name, "exit.json") == 0) exited.insert(d->second);
        if ((ev->mask & IN_CREATE) && std::strcmp(ev->name, "dropped") == 0)
          if (auto rec = records.find(d->second); rec != records.end()) rec->second.truncated = true;
        if ((ev->mask & IN_CREATE) && std::strcmp(ev->name, "log") == 0) {
          if (auto rec = records.find(d->second); rec != records.end() && !rec->second.ended) watch_log(rec->second);
          struct stat st {};  // written before its watch? (empty: no news)
          if (::stat((dir_of(d->second) + "/log").c_str(), &st) == 0 && st.st_size > 0) grown.insert(d->second);
        }
      }
      p += sizeof(inotify_event) + ev->len;
    }
  }
  for (auto& id : grown) {
    if (auto pr = probes.find(id); pr != probes.end()) {
      auto probe = pr->second;
      probe->output();
    }
    reader_probes->output(id);
    dispatch(Event{Event::Kind::output, id});
  }
  for (auto& id : exited) on_monitor_exit(id);
}

void Supervisor::Impl::load_record(const std::string& id) {
  std::string dir = dir_of(id);
  Record r;
  r.id = id;
  auto spec_text = read_file(dir + "/spec.json");
  if (spec_text.ok() && !spec_text.value()) {
    auto slot = read_file(dir + "/slot");
    if (slot.ok() && slot.value()) {
      r.slot = true;
      json j = json::parse(*slot.value(), nullptr, false);
      if (j.is_object()) {
        r.owner_uid = j.value("ownerUid", 0u);
        r.owner_sid = j.value("ownerSid", 0);
      }
    } else {
      r.error = Error{Errc::io_error, "spec.json is missing"};
      r.ended = true;
    }
  } else if (!spec_text.ok()) {
    r.error = spec_text.error();
    r.ended = true;
  } else {
    json j = json::parse(*spec_text.value(), nullptr, false);
    auto spec = j.is_discarded() ? Result<StartSpec>(Error{Errc::io_error, "spec.json is corrupt"})
                                 : spec_from_json(j);
    if (!spec) {
      r.error = spec.error();
      r.ended = true;
    } else {
      r.spec = spec.value();
      r.owner_uid = r.spec->requester_uid;
      r.owner_sid = r.spec->requester_sid;
    }
  }
  if (!r.slot && !r.error) {
    auto mon = read_file(dir + "/monitor.json");
    if (mon.ok() && mon.value()) {
      auto m = parse_monitor(*mon.value());
      if (m) r.monitor = m.value();
      else r.error = m.error();
    }
    auto ex = read_file(dir + "/exit.json");
    if (ex.ok() && ex.value()) {
      auto e = parse_exit(*ex.value());
      r.ended = true;
      if (e) r.exit = e.value();
      else r.error = e.error();
    } else if (!r.error) {
      bool alive = r.monitor.monitor_pid > 0 &&
                   process_start_time(r.monitor.monitor_pid) == r.monitor.monitor_start &&
                   !process_is_zombie(r.monitor.monitor_pid);
      if (!alive) {
        // The monitor may have written exit.json just before it went.
        auto again = read_file(dir + "/exit.json");
        if (!(again.ok() && again.value()))
          finish_unknown(dir, r.monitor.monitor_pid ? &r.monitor : nullptr, env_marks(r));
        auto e2 = read_file(dir + "/exit.json");
        r.ended = true;
        if (e2.ok() && e2.value()) {
          auto e = parse_exit(*e2.value());
          if (e) r.exit = e.value();
          else r.error = e.error();
        }
      }
    }
  }
  if (auto d = dropped_bytes(dir)) {  // running: snapshot() reads it live
    r.truncated = true;
    r.dropped = *d;
  }
  if (r.spec) r.ready_cond = r.spec->ready;
  if (auto rt = read_file(dir + "/ready.json"); rt.ok() && rt.value()) {
    json j = json::parse(*rt.value(), nullptr, false);
    if (j.is_object()) {
      if (j.contains("condition") && j["condition"].is_object())
        if (auto c = ready_condition_from_json(j["condition"]); c && c.value()) r.ready_cond = *c.value();
      r.ready = j.value("ready", false);
      if (j.contains("readyAt") && j["readyAt"].is_string()) r.ready_at = j["readyAt"].get<std::string>();
    }
  }
  if (auto n = parse_auto_id(id)) counter = std::max(counter, *n + 1);
  serial_for(id);
  auto [it, _] = records.insert_or_assign(id, std::move(r));
  if (it->second.ended) note_ended(it->second);
  if (!it->second.ended && !it->second.slot) {
    if (!it->second.monitor.cgroup.empty()) it->second.paused = Cgroup(it->second.monitor.cgroup).frozen();
    ++running;
    ++active_by_uid[it->second.owner_uid];
    watch_running(it->second);
    if (it->second.ready_cond && !it->second.ready) loop->post([this, id] { start_probe(id); });
  }
}

Status Supervisor::Impl::load() {
  if (auto st = make_dirs(opts.state_dir, 0700); !st) return st;
  if (auto st = make_dirs(procs_dir, 0700); !st) return st;
  if (auto st = make_dirs(staging_dir, 0700); !st) return st;
  // Each record's folder in a block group of its own choosing, not the one
  // procs/ shares with its neighbours: on ext4 without a journal, a file
  // created where many were recently deleted (a busy /tmp, old records)
  // costs a scan of all of them. Round trip in /tmp: 5.6 -> 2.0 ms.
  (void)spread_subdirectories(procs_dir);
  (void)spread_subdirectories(staging_dir);  // where the folders are made
  std::string lock_path = opts.state_dir + "/lock";
  lock_fd.reset(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!lock_fd) return error_from_errno(errno, "open " + lock_path);
  if (::flock(lock_fd.get(), LOCK_EX | LOCK_NB) != 0) {
    auto holder = read_file(lock_path);
    std::string who = holder.ok() && holder.value() ? *holder.value() : "?";
    while (!who.empty() && (who.back() == '\n')) who.pop_back();
    return Error{Errc::busy, "state directory " + opts.state_dir + " is in use by pid " + who};
  }
  std::string me = std::to_string(::getpid()) + "\n";
  [[maybe_unused]] auto t = ::ftruncate(lock_fd.get(), 0);
  [[maybe_unused]] auto w = ::pwrite(lock_fd.get(), me.data(), me.size(), 0);

  if (auto c = read_file(opts.state_dir + "/counter"); c.ok() && c.value()) {
    counter_on_disk = std::strtoull(c.value()->c_str(), nullptr, 10);
    counter = std::max<std::uint64_t>(1, counter_on_disk);
  }

  std::vector<std::string> ids;
  std::error_code ec;
  // A start the previous daemon did not finish: the command did start when
  // the monitor wrote monitor.json (keep it), else nothing of it is left.
  auto finish_start = [&](const fs::path& dir, std::string id) {
    if (auto attempt = id.rfind('~'); attempt != std::string::npos) id.resize(attempt);  // new-ID~N: attempt N
    if (fs::exists(dir / "monitor.json") && validate_stored_name(id)) {
      if (fs::exists(dir_of(id))) remove_tree(dir_of(id));
      fs::rename(dir, dir_of(id), ec);
      ids.push_back(id);
    } else {
      remove_tree(dir.string());
    }
  };
  for (auto& e : fs::directory_iterator(staging_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("new-", 0) == 0) finish_start(e.path(), name.substr(4));
    else remove_tree(e.path().string());  // del-*: a removal in progress
  }
  for (auto& e : fs::directory_iterator(procs_dir, ec)) {
    std::string name = e.path().filename().string();
    if (is_legacy_staging(procs_dir, name)) {
      if (name.rfind(".new-", 0) == 0) finish_start(e.path(), name.substr(5));
      else remove_tree(e.path().string());
    } else if (e.is_directory() && validate_stored_name(name)) {
      ids.push_back(name);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::lock_guard g(mu);
  for (auto& id : ids) load_record(id);
  // Scripts of records that are gone (removed while a daemon crashed).
  std::set<std::string> kept;
  for (auto& [id, r] : records)
    if (r.spec && !r.spec->script_file.empty()) kept.insert(r.spec->script_file);
  for (auto& e : fs::directory_iterator(opts.state_dir + "/scripts", ec))
    if (!kept.count(e.path().string())) fs::remove(e.path(), ec);
  return Ok{};
}

Supervisor::Supervisor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Supervisor::~Supervisor() {
  cancel_starts();  // their commands never run; their callers are told
  // Probes belong to the loop thread and unregister from the loop when they
  // go: drop them there, then stop the loop (its callbacks use the rest of Impl).
  std::promise<void> dropped;
  impl_->loop->post([this, &dropped] {
    impl_->probes.clear();
    impl_->reader_probes->clear();
    dropped.set_value();
  });
  dropped.get_future().wait();
  impl_->loop->stop();  // joined: from here on no callback runs
  impl_->work.reset();  // finishes its queue (what it posts to the stopped loop is dropped)
  impl_->loop.reset();
  if (impl_->cgroups) release_cgroup_hierarchy(*impl_->cgroups);
}

Result<std::unique_ptr<Supervisor>> Supervisor::open(SupervisorOptions opts) {
  if (opts.state_dir.empty()) return Error{Errc::invalid_argument, "no state directory given"};
  std::error_code ec;
  auto abs = fs::absolute(opts.state_dir, ec);
  if (!ec) opts.state_dir = abs.lexically_normal().string();
  while (opts.state_dir.size() > 1 && opts.state_dir.back() == '/') opts.state_dir.pop_back();
  if (opts.monitor_path.empty()) opts.monitor_path = default_monitor_path();
  auto impl = std::make_unique<Impl>();
  impl->opts = std::move(opts);
  impl->procs_dir = impl->opts.state_dir + "/procs";
  impl->staging_dir = impl->opts.state_dir + "/staging";
  impl->inotify.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!impl->inotify) return error_from_errno(errno, "inotify_init1");
  try {
    impl->loop = std::make_unique<EventLoop>();
    impl->reader_probes = std::make_unique<ReaderProbes>(*impl->loop);
  } catch (const std::exception& e) {
    return Error{Errc::try_again, e.what()};
  }
  // One thread leaves a core to the event thread on a small machine.
  impl->work = std::make_unique<WorkPool>(std::max(1u, std::thread::hardware_concurrency() / 2));
  Impl* p = impl.get();
  impl->loop->watch(impl->inotify.get(), [p] { p->on_inotify(); });
  // How new commands are tracked, decided once; a hierarchy given by name must work.
  impl->cgroups = find_cgroup_hierarchy(impl->opts.cgroup, cgroup_key(impl->opts.state_dir), &impl->no_cgroup);
  if (!impl->cgroups && !impl->opts.cgroup.empty() && impl->opts.cgroup != "off")
    return Error{Errc::invalid_argument, "cgroup=" + impl->opts.cgroup + ": " + impl->no_cgroup};
  if (auto st = impl->load(); !st) return st.error();
  impl->prune();  // the limits may be lower than last time, or records aged meanwhile
  impl->launcher = std::make_unique<MonitorLauncher>(impl->opts.monitor_path);
  impl->launcher->prestart();
  return std::unique_ptr<Supervisor>(new Supervisor(std::move(impl)));
}

Error interrupted_error() { return Error{Errc::interrupted, "the start was interrupted: nothing was started"}; }
Error shutting_down_error() { return Error{Errc::io_error, "the supervisor is shutting down: nothing was started"}; }

/// A start between its claim and its outcome (start_async). Made on the
/// caller's thread; once handed to the event loop, touched only there.
struct Supervisor::Impl::Starting {
  std::uint64_t token = 0;
  std::string id;
  StartSpec spec;
  bool replacing = false;   // a named slot or ended command of that name is replaced
  std::string old_script;   // the replaced record's script file
  std::string tmp_dir, final_dir;
  std::unique_ptr<PendingLaunch> launch;
  bool let_go = false;      // the command may have exec'd: giving up means killing it
  bool published = false;   // the record is listed
  MonitorInfo monitor;      // from monitor.json, once published
  Cgroup cg;                // the command's cgroup, made before the monitor starts; empty: none
  std::uint64_t timer = 0;  // the current report's deadline
  StartDone done;
  std::atomic<bool> stop_asked{false};
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
};

void Supervisor::start_async(const StartSpec& spec_in, StartMode mode, StartDone done, std::stop_token stop) {
  Impl& I = *impl_;
  if (stop.stop_requested()) return done(Error{Errc::interrupted, "the start was interrupted before it began"});
  auto s = std::make_shared<Impl::Starting>();
  s->spec = spec_in;
  StartSpec& spec = s->spec;
  if (spec.shell.has_value() == !spec.argv.empty())
    return done(Error{Errc::invalid_argument, "give exactly one of argv and a shell command"});
  if (spec.shell && spec.shell->find_first_not_of(" \t\r\n") == std::string::npos)
    return done(Error{Errc::invalid_argument, "the command is empty"});
  auto argv = spec.effective_argv();
  if (argv.empty() || argv[0].empty()) return done(Error{Errc::invalid_argument, "the command is empty"});
  if (spec.cwd.empty() || spec.cwd[0] != '/')
    return done(Error{Errc::invalid_argument, "cwd must be an absolute path (got '" + spec.cwd + "')"});
  // The record is JSON, which holds text only: a working directory whose
  // name is not UTF-8 (the writer's, by default) cannot be recorded.
  if (auto why = why_not_text(spec.cwd))
    return done(Error{Errc::invalid_argument, "cwd is not text (" + *why + "): give a \"cwd\" in a JSON request"});
  struct stat st{};
  if (::stat(spec.cwd.c_str(), &st) != 0) return done(error_from_errno(errno, "cwd '" + spec.cwd + "'"));
  if (!S_ISDIR(st.st_mode)) return done(Error{Errc::not_a_directory, "cwd '" + spec.cwd + "' is not a directory"});
  if (spec.timeout_sec && *spec.timeout_sec <= 0) return done(Error{Errc::invalid_argument, "timeoutSec must be > 0"});
  if (spec.stop_grace_sec < 0) return done(Error{Errc::invalid_argument, "stopGraceSec must be >= 0"});
  if (!spec.name.empty())
    if (auto v = validate_name(spec.name); !v) return done(v.error());
  if (spec.limits)
    if (auto why = limits_refused(*spec.limits, I.cgroups ? &*I.cgroups : nullptr, I.no_cgroup))
      return done(Error{Errc::invalid_argument, *why});

  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (auto& [k, v] : spec.env) env[k] = v;
  for (auto& [k, v] : spec.secret_env) env[k] = v;
  if (auto v = check_executable(argv[0], spec.cwd, env.count("PATH") ? env["PATH"] : ""); !v) return done(v.error());

  // Claim the id (and a place under max_running). `done` runs without the lock.
  std::string& id = s->id;
  if (std::optional<Error> refused = I.claim(*s, mode)) return done(std::move(*refused));

  s->final_dir = I.dir_of(id);
  // A name of its own for each attempt: a monitor of an earlier start of
  // this name that was given up (and resumes late) cannot find this folder.
  s->tmp_dir = I.start_dir(id) + "~" + std::to_string(s->token);
  auto fail_early = [&](Error e) {
    if (!s->cg.empty()) s->cg.remove();
    remove_tree(s->tmp_dir);
    if (!spec.script_file.empty()) ::unlink(spec.script_file.c_str());
    I.unreserve(id, spec.requester_uid);
    done(std::move(e));
  };
  if (::mkdir(s->tmp_dir.c_str(), 0700) != 0) {
    int e = errno;
    I.unreserve(id, spec.requester_uid);
    return done(error_from_errno(e, "mkdir " + s->tmp_dir));
  }
  json sj = spec_to_json(spec);
  sj["bgId"] = id;
  std::string spec_text;
  try {
    spec_text = sj.dump() + "\n";
  } catch (const json::exception& e) {  // a string that is not UTF-8, from a library caller
    return fail_early(Error{Errc::invalid_argument, std::string("the request cannot be recorded: ") + e.what()});
  }
  if (auto w = write_file_atomic(s->tmp_dir + "/spec.json", spec_text); !w) return fail_early(w.error());

  // One exec argument may hold at most 128 KiB (MAX_ARG_STRLEN): longer
  // shell text runs from a file, kept until the record is removed.
  if (spec.shell && spec.shell->size() > kMaxInlineScript) {
    std::string scripts = I.opts.state_dir + "/scripts";
    std::string file = scripts + "/" + id + "-" + std::to_string(Clock::now().time_since_epoch().count()) + ".sh";
    Status w = make_dirs(scripts, 0700);
    if (w) w = write_file_atomic(file, *spec.shell, false);
    if (!w) return fail_early(w.error());
    spec.script_file = file;
    argv = spec.effective_argv();
    sj = spec_to_json(spec);
    sj["bgId"] = id;
    (void)write_file_atomic(s->tmp_dir + "/spec.json", sj.dump() + "\n");
  }
  env["SBX_BGID"] = id;
  MonitorLaunch l;
  l.record_dir = s->tmp_dir;
  l.argv = argv;
  l.env = std::move(env);
  l.cwd = spec.cwd;
  l.timeout_sec = spec.timeout_sec.value_or(0);
  l.grace_sec = spec.stop_grace_sec;
  l.log_max = I.opts.log_max;
  l.run_as = spec.run_as;
  if (I.cgroups) {
    // Made (with its limits) before the monitor exists: the command joins it
    // between fork and exec, so none of its processes ever runs outside.
    const std::string name = "cmd-" + id + "-" + std::to_string(s->token);
    if (int e = create_command_cgroup(*I.cgroups, name, &s->cg))
      return fail_early(error_from_errno(e, "cannot create the cgroup " + I.cgroups->subtree + "/" + name));
    if (spec.limits)
      if (Status st = apply_limits(s->cg, *spec.limits); !st) return fail_early(st.error());
    l.cgroup = s->cg.path();
  }
  auto begun = I.launcher->begin(l);
  if (!begun) return fail_early(begun.error());
  s->launch = std::move(begun.value());
  s->done = std::move(done);

  // A stop from now on is seen by start_begin (the flag) or fails the
  // start on the loop (a start_fail posted before start_begin finds nothing).
  Impl::Starting* raw = s.get();
  s->on_stop.emplace(std::move(stop), std::function<void()>([&I, raw, token = s->token] {
                       raw->stop_asked = true;
                       I.loop->post([&I, token] { I.start_fail(token, interrupted_error()); });
                     }));
  // From here on the event loop drives it.
  I.loop->post([&I, s] { I.start_begin(s); });
}

std::optional<Error> Supervisor::Impl::claim(Starting& s, StartMode mode) {
  std::lock_guard g(mu);
  const StartSpec& spec = s.spec;
  if (closing) return Error{Errc::io_error, "the supervisor is shutting down"};
  if (opts.max_running > 0 && running + starting >= opts.max_running)
    return Error{Errc::try_again, std::to_string(running + starting) +
                                      " commands are running, the most allowed at once (max_running=" +
                                      std::to_string(opts.max_running) + "): stop one or wait for one to end"};
  if (opts.max_running_per_user > 0) {
    const auto mine = active_by_uid.find(spec.requester_uid);
    const std::size_t n = mine == active_by_uid.end() ? 0 : mine->second;
    if (n >= opts.max_running_per_user)
      return Error{Errc::try_again, "uid " + std::to_string(spec.requester_uid) + " runs " + std::to_string(n) +
                                        " commands, the most one user may run at once (max_running_per_user=" +
                                        std::to_string(opts.max_running_per_user) +
                                        "): stop one or wait for one to end"};
  }
  if (!spec.name.empty()) {
    s.id = spec.name;
    if (reserved.count(s.id)) return Error{Errc::busy, "'" + s.id + "' is being started"};
    auto it = records.find(s.id);
    if (it != records.end()) {
      if (mode == StartMode::new_only) return Error{Errc::already_exists, "the name '" + s.id + "' is already in use"};
      if (!it->second.ended && !it->second.slot) return Error{Errc::busy, "'" + s.id + "' is running"};
      s.replacing = true;
      if (it->second.spec) s.old_script = it->second.spec->script_file;
    }
  } else {
    do {
      s.id = format_auto_id(counter++);
    } while (records.count(s.id) || reserved.count(s.id));
  }
  reserved.insert(s.id);
  ++starting;
  ++active_by_uid[spec.requester_uid];
  s.token = next_start++;
  return std::nullopt;
}

void Supervisor::Impl::unreserve(const std::string& id, uid_t owner) {
  std::lock_guard g(mu);
  reserved.erase(id);
  --starting;
  if (--active_by_uid[owner] == 0) active_by_uid.erase(owner);
}

void Supervisor::Impl::start_begin(const std::shared_ptr<Starting>& s) {
  const std::uint64_t token = s->token;
  starts.emplace(token, s);
  if (s->stop_asked) return start_fail(token, interrupted_error());
  bool closing_now = false;
  {
    std::lock_guard g(mu);
    closing_now = closing;  // cancel_starts() ran before this start reached the loop
  }
  if (closing_now) return start_fail(token, shutting_down_error());
  loop->watch(s->launch->report_fd(), [this, token] { start_report(token); });
  if (const int job = s->launch->job_fd(); job >= 0) {
    loop->watch(
        job,
        [this, token, job] {
          auto it = starts.find(token);
          if (it == starts.end() || !it->second->launch->send_job()) return;
          loop->unwatch(job);
          it->second->launch->end_job();
        },
        true);
  }
  arm_start_timer(*s, "forked");
}

void Supervisor::Impl::arm_start_timer(Starting& s, const char* report) {
  if (s.timer) loop->cancel_timer(s.timer);
  const std::uint64_t token = s.token;
  const auto limit = opts.start_timeout;
  s.timer = loop->add_timer(Clock::now() + limit, [this, token, limit, what = std::string(report)] {
    auto it = starts.find(token);
    if (it == starts.end()) return;
    it->second->timer = 0;
    start_fail(token, Error{Errc::timed_out, "the command's monitor did not report '" + what + "' within " +
                                                 std::to_string(limit.count()) + " ms: nothing was started"});
  });
}

void Supervisor::Impl::start_report(std::uint64_t token) {
  auto it = starts.find(token);
  if (it == starts.end()) return;
  Starting& s = *it->second;
  while (std::optional<std::string> line = s.launch->next_line()) {
    if (!s.let_go) {
      auto forked = PendingLaunch::parse(*line, "forked");
      if (!forked) return start_fail(token, forked.error());
      if (Status st = start_publish(s, forked.value()); !st) return start_fail(token, st.error());
      s.let_go = true;
      arm_start_timer(s, "ok");
      s.launch->go();
      continue;
    }
    auto ok = PendingLaunch::parse(*line, "ok");
    if (!ok) {
      // Only the monitor's own "err" report says that nothing runs; EOF or
      // garbage (a monitor killed after the go) may leave an exec'd
      // command, which giving up must then kill.
      if (line->rfind("err ", 0) == 0) s.let_go = false;
      return start_fail(token, ok.error());
    }
    return start_commit(token);
  }
}

Status Supervisor::Impl::start_publish(Starting& s, pid_t pid) {
  // Published (folder renamed, record listed) once the command is forked
  // and before it may exec: a command that looks at its own record at once
  // (sbx-step, cat procs/$SBX_BGID/status.json) finds it.
  if (!s.old_script.empty()) ::unlink(s.old_script.c_str());
  if (s.replacing) {
    std::string del = deletion_dir();
    if (::rename(s.final_dir.c_str(), del.c_str()) == 0) work->post([del] { remove_tree(del); });
  }
  if (::rename(s.tmp_dir.c_str(), s.final_dir.c_str()) != 0) return error_from_errno(errno, "rename " + s.tmp_dir);
  MonitorInfo m;
  if (auto mt = read_file(s.final_dir + "/monitor.json"); mt.ok() && mt.value()) {
    if (auto pm = parse_monitor(*mt.value())) m = pm.value();
  }
  if (m.pid == 0) m.pid = pid;
  s.monitor = m;
  std::lock_guard g(mu);
  ended_index.erase(s.id);  // a named command that ended is replaced
  serial_for(s.id);
  Record r;
  r.id = s.id;
  r.spec = s.spec;
  r.owner_uid = s.spec.requester_uid;
  r.owner_sid = s.spec.requester_sid;
  r.monitor = m;
  r.ready_cond = s.spec.ready;
  records.insert_or_assign(s.id, std::move(r));  // still reserved: not watched, not pruned
  s.published = true;
  return Ok{};
}

void Supervisor::Impl::start_commit(std::uint64_t token) {
  std::shared_ptr<Starting> s = start_take(token);
  const std::string id = s->id;
  CommandStatus out;
  {
    std::lock_guard g(mu);
    reserved.erase(id);
    --starting;
    ++running;
    auto it = records.find(id);
    // Queued before the monitor's pidfd is watched, so it is told first.
    emit(Event::Kind::started, id);
    if (s->spec.ready) loop->post([this, id] { start_probe(id); });
    watch_running(it->second);
    out = snapshot(it->second);
  }
  cpu.forget(id);
  s->done(std::move(out));
}

std::shared_ptr<Supervisor::Impl::Starting> Supervisor::Impl::start_take(std::uint64_t token) {
  auto it = starts.find(token);
  std::shared_ptr<Starting> s = std::move(it->second);
  starts.erase(it);
  if (s->timer) loop->cancel_timer(s->timer);
  loop->unwatch(s->launch->report_fd());
  if (s->launch->job_fd() >= 0) loop->unwatch(s->launch->job_fd());
  s->on_stop.reset();  // waits for a stop callback running right now (it only posts)
  return s;
}

void Supervisor::Impl::start_fail(std::uint64_t token, Error e) {
  if (!starts.count(token)) return;  // decided already
  std::shared_ptr<Starting> s = start_take(token);
  s->launch->cancel();  // a command not yet let go exits without exec
  if (s->let_go) {
    // It may have exec'd: end it, and its monitor, so nothing of a failed
    // start keeps running (its session first, in case it made one).
    const MonitorInfo& m = s->monitor;
    if (m.pid > 0 && process_start_time(m.pid) == m.pid_start) {
      ::kill(-m.pid, SIGKILL);
      ::kill(m.pid, SIGKILL);
    }
    if (m.monitor_pid > 0 && process_start_time(m.monitor_pid) == m.monitor_start) ::kill(m.monitor_pid, SIGKILL);
  }
  s->launch.reset();
  if (!s->cg.empty()) {
    // Nothing of it runs on: what may have exec'd is killed, the rest exits at the go's EOF.
    if (s->let_go) s->cg.kill();
    if (!s->cg.wait_empty(std::chrono::seconds(1)) || s->cg.remove() != 0)
      work->post([cg = s->cg] {
        cg.kill();
        cg.wait_empty(std::chrono::seconds(10));
        cg.remove();
      });
  }
  if (!s->spec.script_file.empty()) ::unlink(s->spec.script_file.c_str());
  std::string gone = s->tmp_dir;
  if (s->published) {
    std::lock_guard g(mu);
    records.erase(s->id);
    gone = deletion_dir();
    if (::rename(s->final_dir.c_str(), gone.c_str()) != 0) gone.clear();
  }
  // A few small files (the command never ran long enough to write much):
  // removed before the caller is told, so a failed start leaves nothing.
  if (!gone.empty()) remove_tree(gone);
  unreserve(s->id, s->spec.requester_uid);
  if (s->published) emit(Event::Kind::removed, s->id);
  s->done(std::move(e));
}

Result<CommandStatus> Supervisor::start(const StartSpec& spec, StartMode mode) {
  if (impl_->loop->on_loop_thread())
    return Error{Errc::busy, "a blocking start on the event thread would wait for itself: use start_async"};
  auto outcome = std::make_shared<std::promise<Result<CommandStatus>>>();
  std::future<Result<CommandStatus>> f = outcome->get_future();
  start_async(spec, mode, [outcome](Result<CommandStatus> r) { outcome->set_value(std::move(r)); });
  return f.get();
}

void Supervisor::cancel_starts() {
  Impl& I = *impl_;
  {
    std::lock_guard g(I.mu);
    I.closing = true;
  }
  auto fail_all = [&I] {
    std::vector<std::uint64_t> tokens;
    for (auto& [token, s] : I.starts) tokens.push_back(token);
    for (std::uint64_t t : tokens) I.start_fail(t, shutting_down_error());
  };
  if (I.loop->on_loop_thread()) return fail_all();
  // A start handed to the loop after this task fails in start_begin.
  std::promise<void> done;
  I.loop->post([&] {
    fail_all();
    done.set_value();
  });
  done.get_future().wait();
}

Result<CommandStatus> Supervisor::create_slot(const std::string& name, uid_t owner_uid, pid_t owner_sid) {
  Impl& I = *impl_;
  if (auto v = validate_name(name); !v) return v.error();
  {
    std::lock_guard g(I.mu);
    if (I.records.count(name) || I.reserved.count(name))
      return Error{Errc::already_exists, "'" + name + "' already exists"};
    I.reserved.insert(name);
  }
  std::string tmp = I.start_dir(name);
  remove_tree(tmp);
  Status st = Ok{};
  if (::mkdir(tmp.c_str(), 0700) != 0) {
    st = error_from_errno(errno, "mkdir " + tmp);
  } else {
    json j = {{"ownerUid", owner_uid}, {"ownerSid", owner_sid}};
    st = write_file_atomic(tmp + "/slot", j.dump() + "\n");
    if (st && ::rename(tmp.c_str(), I.dir_of(name).c_str()) != 0) st = error_from_errno(errno, "rename " + tmp);
  }
  std::lock_guard g(I.mu);
  I.reserved.erase(name);
  if (!st) {
    remove_tree(tmp);
    return st.error();
  }
  I.serial_for(name);
  Record r;
  r.id = name;
  r.slot = true;
  r.owner_uid = owner_uid;
  r.owner_sid = owner_sid;
  auto [it, _] = I.records.insert_or_assign(name, std::move(r));
  I.emit(Event::Kind::started, name);
  return I.snapshot(it->second);
}

namespace {
Status write_ctl(const std::string& dir, const std::string& line) {
  int fd = ::open((dir + "/ctl").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    // ENXIO/ENOENT: the monitor is finishing; its exit event follows.
    if (errno == ENXIO || errno == ENOENT) return Ok{};
    return error_from_errno(errno, "open " + dir + "/ctl");
  }
  ssize_t n = ::write(fd, line.data(), line.size());
  int e = errno;
  ::close(fd);
  if (n < 0 && e != EPIPE) return error_from_errno(e, "write " + dir + "/ctl");
  return Ok{};
}
}  // namespace

Status Supervisor::stop(const std::string& id) {
  std::lock_guard g(impl_->mu);
  auto it = impl_->records.find(id);
  if (it == impl_->records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
  if (it->second.ended || it->second.slot) return Ok{};
  it->second.paused = false;  // the monitor thaws it to deliver the TERM
  return write_ctl(impl_->dir_of(id), "term\n");
}

Status Supervisor::signal(const std::string& id, int sig) {
  if (sig < 1 || sig > SIGRTMAX) return Error{Errc::invalid_argument, "no signal " + std::to_string(sig)};
  std::lock_guard g(impl_->mu);
  auto it = impl_->records.find(id);
  if (it == impl_->records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
  if (it->second.slot) return Error{Errc::no_such_process, "'" + id + "' has not been started"};
  if (it->second.ended) return Error{Errc::no_such_process, "'" + id + "' has ended"};
  if (sig == SIGSTOP || sig == SIGCONT) {
    // With a cgroup, STOP freezes every member (none can undo it, none is
    // missed) and CONT thaws them; CONT is still sent, for one stopped by itself.
    if (const std::string& cg = it->second.monitor.cgroup; !cg.empty()) {
      if (int e = Cgroup(cg).freeze(sig == SIGSTOP)) return error_from_errno(e, "cannot write " + cg + "/cgroup.freeze");
      it->second.paused = sig == SIGSTOP;
      if (sig == SIGSTOP) return Ok{};
    }
    it->second.paused = sig == SIGSTOP;
  }
  return write_ctl(impl_->dir_of(id), "signal " + std::to_string(sig) + "\n");
}

Status Supervisor::set_ready(const std::string& id, const ReadyCondition& c) {
  Impl& I = *impl_;
  {
    std::lock_guard g(I.mu);
    auto it = I.records.find(id);
    if (it == I.records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
    if (it->second.slot) return Error{Errc::no_such_process, "'" + id + "' has not been started"};
    if (it->second.ended) return Error{Errc::no_such_process, "'" + id + "' has ended"};
    it->second.ready_cond = c;
    it->second.ready = false;
    it->second.ready_at.clear();
    I.save_ready(it->second);
  }
  I.loop->post([&I, id] { I.start_probe(id); });
  return Ok{};
}

Result<std::uint64_t> Supervisor::probe_for_reader(const std::string& id, const ReadyCondition& c,
                                                   std::function<void()> on_ready) {
  Impl& I = *impl_;
  auto running = [&I, id] {
    std::lock_guard g(I.mu);
    auto it = I.records.find(id);
    return it != I.records.end() && !it->second.slot && !it->second.ended;
  };
  {
    std::lock_guard g(I.mu);
    auto it = I.records.find(id);
    if (it == I.records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
    if (it->second.slot) return Error{Errc::no_such_process, "'" + id + "' has not been started"};
    if (it->second.ended) return Error{Errc::no_such_process, "'" + id + "' has ended"};
  }
  return I.reader_probes->add(id, c, I.dir_of(id) + "/log", std::move(on_ready), running);
}

void Supervisor::cancel_probe(std::uint64_t token) { impl_->reader_probes->cancel(token); }

Status Supervisor::remove(const std::string& id) {
  Impl& I = *impl_;
  std::string del;
  {
    std::lock_guard g(I.mu);
    auto it = I.records.find(id);
    if (it == I.records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
    if (!it->second.ended && !it->second.slot) return Error{Errc::busy, "'" + id + "' is running; stop it first"};
    if (I.reserved.count(id)) return Error{Errc::busy, "'" + id + "' is being started"};
    Status err = Ok{};
    del = I.detach(it, &err);
    if (del.empty()) return err;
    I.arm_retention_timer();
  }
  remove_tree(del);
  I.changed.notify_all();
  I.emit(Event::Kind::removed, id);
  return Ok{};
}

std::optional<CommandStatus> Supervisor::status(const std::string& id, CpuFigure cpu) const {
  CommandStatus s;
  pid_t monitor = 0;
  {
    std::lock_guard g(impl_->mu);
    auto it = impl_->records.find(id);
    if (it == impl_->records.end()) return std::nullopt;
    s = impl_->snapshot(it->second);
    monitor = it->second.monitor.monitor_pid;
  }
  if (s.running && cpu == CpuFigure::sample) s.cpu = impl_->cpu.percent({id, monitor, s.cgroup});
  return s;
}

namespace {
// The figures of the running ones among `out`, sampled now where stale.
void add_cpu(CpuSampler& sampler, std::vector<CommandStatus>& out, const std::vector<pid_t>& monitors) {
  std::vector<CpuSampler::Tree> trees;
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!out[i].running) continue;
    trees.push_back({out[i].bg_id, monitors[i], out[i].cgroup});
    at.push_back(i);
  }
  const std::vector<double> figures = sampler.percents(trees);
  for (std::size_t k = 0; k < at.size(); ++k) out[at[k]].cpu = figures[k];
}
}  // namespace

std::vector<CommandStatus> Supervisor::list() const {
  std::vector<CommandStatus> out;
  std::vector<pid_t> monitors;
  {
    std::lock_guard g(impl_->mu);
    out.reserve(impl_->records.size());
    for (auto& [id, r] : impl_->records) {
      out.push_back(impl_->snapshot(r));
      monitors.push_back(r.monitor.monitor_pid);
    }
  }
  add_cpu(impl_->cpu, out, monitors);
  return out;
}

std::vector<RecordEntry> Supervisor::entries() const {
  std::vector<RecordEntry> out;
  std::lock_guard g(impl_->mu);
  out.reserve(impl_->records.size());
  for (auto& [id, r] : impl_->records) {
    auto s = impl_->serials.find(id);
    out.push_back(RecordEntry{id, s == impl_->serials.end() ? 0 : s->second, r.owner_uid, r.slot && !r.error});
  }
  return out;
}

std::vector<EndedEntry> Supervisor::ended_entries(std::optional<uid_t> owner) const {
  std::vector<EndedEntry> out;
  std::lock_guard g(impl_->mu);
  for (auto& [id, r] : impl_->records) {
    if (r.slot || !(r.ended || r.error)) continue;  // as list_running() counts them
    if (owner && r.owner_uid != *owner) continue;
    auto s = impl_->serials.find(id);
    out.push_back(EndedEntry{id, s == impl_->serials.end() ? 0 : s->second, r.owner_uid, r.monitor.started_at,
                             r.exit.finished_at});
  }
  return out;
}

std::vector<CommandStatus> Supervisor::list_running(std::size_t* ended, std::optional<uid_t> owner,
                                                    CpuFigure cpu) const {
  std::vector<CommandStatus> out;
  std::vector<pid_t> monitors;
  std::size_t rest = 0;
  {
    std::lock_guard g(impl_->mu);
    out.reserve(impl_->running);
    monitors.reserve(impl_->running);
    for (auto& [id, r] : impl_->records) {
      if (r.slot || (owner && r.owner_uid != *owner)) continue;
      if (r.ended || r.error) {
        ++rest;
        continue;
      }
      out.push_back(impl_->snapshot(r));
      monitors.push_back(r.monitor.monitor_pid);
    }
  }
  if (cpu == CpuFigure::sample) add_cpu(impl_->cpu, out, monitors);
  if (ended) *ended = rest;
  return out;
}

SupervisorInfo Supervisor::info() const {
  const auto& cg = impl_->cgroups;
  return SupervisorInfo{::getpid(), impl_->started_at, impl_->opts.state_dir, cg ? "cgroup" : "proctree",
                        cg ? cg->subtree : impl_->no_cgroup};
}

std::optional<CommandStatus> Supervisor::wait(const std::string& id, std::chrono::milliseconds timeout) {
  {
    std::unique_lock g(impl_->mu);
    impl_->changed.wait_for(g, timeout, [&] {
      auto it = impl_->records.find(id);
      return it == impl_->records.end() || it->second.ended || it->second.slot;
    });
  }
  return status(id);
}

std::optional<CommandStatus> Supervisor::stop_and_wait(const std::string& id, std::chrono::milliseconds timeout) {
  if (!stop(id)) return status(id);
  return wait(id, timeout);
}

std::uint64_t Supervisor::subscribe(Listener l) {
  std::lock_guard g(impl_->listeners_mu);
  auto t = impl_->next_token++;
  impl_->listeners.emplace_back(t, std::move(l));
  return t;
}

void Supervisor::unsubscribe(std::uint64_t token) {
  std::lock_guard g(impl_->listeners_mu);
  std::erase_if(impl_->listeners, [&](auto& p) { return p.first == token; });
}

std::uint64_t Supervisor::add_timer(Clock::time_point when, TimerCallback cb) {
  return impl_->loop->add_timer(when, std::move(cb));
}

bool Supervisor::cancel_timer(std::uint64_t token) { return impl_->loop->cancel_timer(token); }

void Supervisor::post(std::function<void()> fn) { impl_->loop->post(std::move(fn)); }

void Supervisor::post_work(std::function<void()> fn) { impl_->work->post(std::move(fn)); }

std::vector<std::string> Supervisor::secrets(const std::string& id) const {
  std::lock_guard g(impl_->mu);
  auto it = impl_->records.find(id);
  auto s = impl_->secrets_of(it == impl_->records.end() ? nullptr : &it->second);
  std::erase_if(s, [](const std::string& v) { return v.empty(); });
  return s;
}

std::string Supervisor::mask(std::string_view text, const std::string& id) const {
  std::vector<std::string> secrets;
  {
    std::lock_guard g(impl_->mu);
    auto it = id.empty() ? impl_->records.end() : impl_->records.find(id);
    secrets = impl_->secrets_of(it == impl_->records.end() ? nullptr : &it->second);
  }
  return mask_secrets(text, std::move(secrets));
}

}  // namespace sup
