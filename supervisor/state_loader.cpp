// Opening the state directory: its lock, the starts a previous daemon left, and every record in it.
#include "supervisor/supervisor_impl.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "supervisor/auto_id.hpp"
#include "supervisor/cgroup.hpp"
#include "supervisor/ctl_request.hpp"
#include "supervisor/exit_record.hpp"
#include "supervisor/files.hpp"
#include "supervisor/legacy_staging.hpp"
#include "supervisor/log_limit.hpp"
#include "supervisor/monitor_ctl.hpp"
#include "supervisor/proc_tree.hpp"
#include "supervisor/ready_record.hpp"
#include "supervisor/slot_record.hpp"

namespace sup {

namespace fs = std::filesystem;

namespace {

/// How long a daemon waits for the state directory's lock before it gives up.
constexpr std::chrono::seconds kLockWait{2};

}  // namespace

using nlohmann::json;

void Supervisor::Impl::load_record(const std::string& id) {
  std::string dir = dir_of(id);
  Record r;
  r.id = id;
  auto spec_text = read_file(dir + "/spec.json");
  if (spec_text.ok() && !spec_text.value()) {
    auto slot = read_file(dir + "/" + kSlotFile);
    if (slot.ok() && slot.value()) {
      r.state = CommandState::empty;
      const SlotOwner owner = parse_slot(*slot.value());
      r.owner_uid = owner.uid;
      r.owner_sid = owner.sid;
    } else {
      r.error = Error{Errc::io_error, "spec.json is missing"};
      r.state = CommandState::error;
    }
  } else if (!spec_text.ok()) {
    r.error = spec_text.error();
    r.state = CommandState::error;
  } else {
    json j = json::parse(*spec_text.value(), nullptr, false);
    auto spec = j.is_discarded() ? Result<StartSpec>(Error{Errc::io_error, "spec.json is corrupt"})
                                 : spec_from_json(j);
    if (!spec) {
      r.error = spec.error();
      r.state = CommandState::error;
    } else {
      r.spec = spec.value();
      r.owner_uid = r.spec->requester_uid;
      r.owner_sid = r.spec->requester_sid;
    }
  }
  // A record whose spec.json cannot be read may still have started: the
  // rest of it is read as any other's.
  const bool spec_unread = r.state == CommandState::error;
  if (spec_unread) r.state = CommandState::running;
  if (r.state == CommandState::running && !r.error && load_queued(r)) {
    // Not started yet: started in order once loaded (start_queue.cpp).
  } else if (r.state == CommandState::running) {
    auto mon = read_file(dir + "/monitor.json");
    const bool mon_kept = mon.ok() && mon.value();
    if (mon_kept) {
      auto m = parse_monitor(*mon.value());
      if (m) r.monitor = m.value();
      else if (!r.error) r.error = m.error();
    }
    auto ex = read_file(dir + "/exit.json");
    if (ex.ok() && ex.value()) {
      auto e = parse_exit(*ex.value());
      r.state = CommandState::exited;
      if (e) r.exit = e.value();
      else if (!r.error) r.error = e.error();
    } else {
      // A torn monitor.json: its monitor and cgroup are found otherwise, so
      // that a live one is watched (its end, or its death) and a dead one's
      // leftovers are ended, as for any record.
      if (mon_kept && r.monitor.monitor_pid <= 0) recover_monitor(id, &r.monitor);
      bool alive = r.monitor.monitor_pid > 0 &&
                   process_start_time(r.monitor.monitor_pid) == r.monitor.monitor_start &&
                   !process_is_zombie(r.monitor.monitor_pid);
      if (!mon_kept && r.error) {
        // Neither its spec nor a monitor.json: nothing says it ever ran.
        r.state = CommandState::error;
      } else if (!alive) {
        // The monitor may have written exit.json just before it went.
        auto again = read_file(dir + "/exit.json");
        const bool known = r.monitor.monitor_pid > 0 || !r.monitor.cgroup.empty();
        if (!(again.ok() && again.value())) finish_unknown(dir, known ? &r.monitor : nullptr, env_marks(r));
        auto e2 = read_file(dir + "/exit.json");
        r.state = CommandState::exited;
        if (e2.ok() && e2.value()) {
          auto e = parse_exit(*e2.value());
          if (e) r.exit = e.value();
          else if (!r.error) r.error = e.error();
        }
      }
    }
  }
  if (auto d = dropped_bytes(dir)) {  // running: snapshot() reads it live
    r.truncated = true;
    r.dropped = *d;
  }
  if (r.spec) r.ready_cond = r.spec->ready;
  if (auto rt = read_file(dir + "/" + kReadyFile); rt.ok() && rt.value()) {
    if (std::optional<ReadyRecord> saved = parse_ready(*rt.value())) {
      if (saved->condition) r.ready_cond = saved->condition;
      r.ready = saved->ready;
      r.ready_at = saved->ready_at;
      r.ready_match = saved->matched;
      r.ready_settled = saved->settled;
    }
  }
  // Automatic ids go on after those given; a name that only looks like one
  // (a slot named 9999) is no id given.
  if (r.spec && r.spec->name.empty())
    if (auto n = parse_auto_id(id)) counter = std::max(counter, *n + 1);
  r.serial = serial_for(id);
  if (r.error) load_errors.emplace_back(id, *r.error);
  auto it = put_record(id, std::move(r));
  ++listing_gen;
  if (it->second.error && has_ended(it->second.state)) it->second.state = CommandState::error;
  if (has_ended(it->second.state)) {
    note_ended(it->second);
    // It may have become ready, and ended, while no daemon ran: its log is
    // searched on the work pool, not where requests are answered.
    if (it->second.ready_cond && !it->second.ready && !it->second.ready_settled)
      work->post([this, id] { settle_ready(id); });
  }
  if (is_running(it->second.state)) {
    if (const std::string& cg = it->second.monitor.cgroup; !cg.empty()) {
      const std::uint64_t n = std::strtoull(cg.c_str() + cg.rfind('-') + 1, nullptr, 10);
      if (n >= cgroup_serial) cgroup_serial = n + 1;
    }
    // A frozen cgroup is a command paused before the restart; without a
    // cgroup, a command whose first process is stopped (T) is; a monitor
    // between two runs (restart policy) says when the next one starts.
    if (paused_before(it->second.monitor))
      it->second.state = transition(it->second.state, CommandEvent::pause_asked).next;
    it->second.state = apply_run_state(it->second.state, it->second.monitor);
    ++running;
    ++active_by_uid[it->second.owner_uid];
    watch_running(it->second);
    if (it->second.ready_cond && !it->second.ready) loop->post([this, id] { start_probe(id); });
  }
}

bool Supervisor::Impl::paused_before(const MonitorInfo& m) {
  if (!m.cgroup.empty()) return Cgroup(m.cgroup).frozen();
  ProcStat ps;
  return m.pid > 0 && read_proc_stat(m.pid, &ps) && ps.state == 'T' && (m.pid_start == 0 || ps.starttime == m.pid_start);
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
  // A daemon that is exiting (its mount just went: `fusermount3 -u`) lets go
  // of the lock within milliseconds; a restart right behind it waits for
  // that rather than fail. A live one holds it: refused after the wait.
  if (lock_within(lock_fd.get(), kLockWait) != 0) {
    auto holder = read_file(lock_path);
    std::string who = holder.ok() && holder.value() ? *holder.value() : "?";
    while (!who.empty() && (who.back() == '\n')) who.pop_back();
    return Error{Errc::busy, "state directory " + opts.state_dir + " is in use by pid " + who};
  }
  std::string me = std::to_string(::getpid()) + "\n";
  [[maybe_unused]] auto t = ::ftruncate(lock_fd.get(), 0);
  [[maybe_unused]] auto w = ::pwrite(lock_fd.get(), me.data(), me.size(), 0);
  // The same in a file of its own, for a service manager (systemd's
  // PIDFile=, which it removes when the unit ends or fails to start: the
  // lock must not be that file, or a second daemon would find it gone).
  (void)write_file_atomic(opts.state_dir + "/pid", me);

  cgroup_serial = static_cast<std::uint64_t>(now_ms());
  // Start attempts (staging/new-ID~N) are named apart from every earlier
  // daemon's, whose late monitors may still look for theirs: counted on
  // from the time in microseconds, which no daemon's count of starts passes.
  next_start = static_cast<std::uint64_t>(now_ms()) * 1000;
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
  // A record a start was replacing (a slot run again), held aside: by id.
  std::map<std::string, fs::path> held;
  for (auto& e : fs::directory_iterator(staging_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("new-", 0) == 0) {
      finish_start(e.path(), name.substr(4));
    } else if (const std::size_t dash = name.find('-', 5); name.rfind("held-", 0) == 0 && dash != std::string::npos) {
      held[name.substr(dash + 1)] = e.path();
    } else {
      remove_tree(e.path().string());  // del-*: a removal in progress; spare-*: an empty folder
    }
  }
  // Published (renamed into procs/) once its command was forked, but the
  // daemon died before the command was let go: its monitor cancelled the
  // exec and removed monitor.json. Nothing of it ran: it goes, and the
  // record it was replacing comes back.
  auto never_ran = [&](const std::string& id) {
    auto has = [&](const char* name) { return record_has(id, name); };
    return has("spec.json") && !has(kMonitorFile) && !has(kExitFile) && !has("queued") && !has(kSlotFile);
  };
  for (auto& [id, path] : held) {
    std::error_code gone;
    if (validate_stored_name(id) && (!fs::exists(dir_of(id), gone) || never_ran(id))) {
      if (fs::exists(dir_of(id), gone)) never_let_go.push_back(id);
      remove_tree(dir_of(id));
      fs::rename(path, dir_of(id), ec);
    } else {
      remove_tree(path.string());  // the start that replaced it got as far as its command
    }
  }
  for (auto& e : fs::directory_iterator(procs_dir, ec)) {
    std::string name = e.path().filename().string();
    if (is_legacy_staging(procs_dir, name)) {
      if (name.rfind(".new-", 0) == 0) finish_start(e.path(), name.substr(5));
      else remove_tree(e.path().string());
    } else if (e.is_directory() && validate_stored_name(name)) {
      if (never_ran(name)) {
        never_let_go.push_back(name);
        remove_tree(e.path().string());
      }
      else ids.push_back(name);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::lock_guard g(mu);
  for (auto& id : ids) load_record(id);
  // The box's steps name a start that never ran (its step was written
  // before the go): its automatic id is not given again.
  for (const std::string& id : never_let_go)
    if (auto n = parse_auto_id(id); n && *n + 1 > counter) {
      counter = *n + 1;
      save_counter_for(id);
    }
  sweep_stray_cgroups();
  if (cgroups) hold_cgroup_hierarchy(*cgroups);
  // Scripts of records that are gone (removed while a daemon crashed).
  std::set<std::string> kept;
  for (auto& [id, r] : records)
    if (r.spec && !r.spec->script_file.empty()) kept.insert(r.spec->script_file);
  for (auto& e : fs::directory_iterator(opts.state_dir + "/scripts", ec))
    if (!kept.count(e.path().string())) fs::remove(e.path(), ec);
  return Ok{};
}

void Supervisor::Impl::recover_monitor(const std::string& id, MonitorInfo* m) const {
  // Its cgroup: the one of its name in the subtree (made by one start).
  if (cgroups) {
    std::vector<std::string> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cgroups->subtree, ec)) {
      if (command_cgroup_id(e.path().filename().string()) == id) found.push_back(e.path());
    }
    if (found.size() == 1) m->cgroup = found.front();
  }
  // Its monitor: the one process that holds its ctl FIFO open (to read it),
  // looked for only when someone does.
  const std::string ctl = dir_of(id) + "/" + kCtlFile;
  struct stat fifo {};
  if (!monitor_answers(dir_of(id)) || ::stat(ctl.c_str(), &fifo) != 0) return;
  std::error_code ec;
  for (const auto& p : fs::directory_iterator("/proc", ec)) {
    const std::string pid_text = p.path().filename().string();
    if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid == ::getpid()) continue;
    std::error_code fd_ec;
    for (const auto& fd : fs::directory_iterator(p.path() / "fd", fd_ec)) {
      struct stat st {};
      if (::stat(fd.path().c_str(), &st) != 0 || !S_ISFIFO(st.st_mode) || st.st_ino != fifo.st_ino ||
          st.st_dev != fifo.st_dev)
        continue;
      m->monitor_pid = pid;
      m->monitor_start = process_start_time(pid).value_or(0);
      return;
    }
  }
}

void Supervisor::Impl::sweep_stray_cgroups() {
  // A start that a killed daemon left in flight made its cgroup (and may
  // have forked its command into it) but no record: its folder was removed
  // above, so nothing says it ran, and nothing of it may be left. Nor of a
  // cgroup a record no longer names (an aborted run of a slot). A running
  // record that names none (its cgroup not found) keeps those of its id.
  if (!cgroups) return;
  std::set<std::string> owned, unknown_ids;  // by name: a path may be spelt otherwise than this daemon's
  for (const auto& [id, r] : records) {
    if (!is_running(r.state)) continue;
    if (!r.monitor.cgroup.empty()) owned.insert(r.monitor.cgroup.substr(r.monitor.cgroup.rfind('/') + 1));
    else unknown_ids.insert(id);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cgroups->subtree, ec)) {
    const std::string name = e.path().filename().string();
    const std::optional<std::string> id = command_cgroup_id(name);
    if (!id || !e.is_directory(ec)) continue;
    if (owned.count(name) || unknown_ids.count(*id)) continue;
    (void)Cgroup(e.path().string()).destroy(std::chrono::seconds(2));
  }
}

}  // namespace sup
