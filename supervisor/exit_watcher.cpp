// Watching running commands: the log grows, exit.json appears, the monitor goes (pidfd), and what is left when it went without a word;
// under a restart policy, monitor.json changes with each run.
#include "supervisor/supervisor_impl.hpp"

#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "supervisor/atomic_write.hpp"
#include "supervisor/exit_record.hpp"
#include "supervisor/files.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/log_limit.hpp"
#include "supervisor/notify_record.hpp"
#include "supervisor/orphan_sweep.hpp"
#include "supervisor/proc_tree.hpp"

namespace sup {

namespace {

// A watch that reports nothing: IN_MOVE_SELF of a file that is never
// renamed (its folder is, on removal, which is no event of the file). A
// watch's mask is changed in place by adding it again; removing and making
// it again would cost the kernel's workers each time.
constexpr std::uint32_t kQuiet = IN_MOVE_SELF;

std::uint32_t output_mask(const Record& r) { return r.output_armed ? IN_MODIFY : kQuiet; }

}  // namespace

void Supervisor::Impl::watch_log(Record& r) {
  // A monitor that keeps an index appends to it after each write to the
  // log: its change says that both have the bytes. Older monitors: the log.
  const std::string dir = dir_of(r.id);
  for (const char* name : {"/index", "/log"}) {
    const int wd = ::inotify_add_watch(inotify.get(), (dir + name).c_str(), output_mask(r));
    if (wd < 0) continue;
    r.log_wd = wd;
    r.log_watched = dir + name;
    wd_ids[wd] = r.id;
    break;
  }
  // Past log_max the output goes on in tail segments (log_index.hpp).
  for (const std::uint64_t g : tail_generations(dir)) watch_tail(r, tail_index_name(g));
}

void Supervisor::Impl::watch_tail(Record& r, const std::string& name) {
  // The kernel drops the watch when the monitor removes the segment.
  const int wd = ::inotify_add_watch(inotify.get(), (dir_of(r.id) + "/" + name).c_str(), output_mask(r));
  if (wd < 0) return;
  wd_ids[wd] = r.id;
  r.tail_wds[wd] = name;
}

void Supervisor::Impl::arm_output(Record& r, bool on) {
  r.output_armed = on;
  // The same file, the same watch: only its mask changes. A file gone
  // (a segment removed) has its watch dropped by the kernel already.
  if (r.log_wd >= 0) (void)::inotify_add_watch(inotify.get(), r.log_watched.c_str(), output_mask(r));
  for (const auto& [wd, name] : r.tail_wds)
    (void)::inotify_add_watch(inotify.get(), (dir_of(r.id) + "/" + name).c_str(), output_mask(r));
}

void Supervisor::Impl::want_output(const std::string& id) {
  std::lock_guard g(mu);
  auto it = records.find(id);
  if (it == records.end()) return;
  ++it->second.output_wants;
  if (!it->second.output_armed) arm_output(it->second, true);
}

bool Supervisor::Impl::output_followed(const std::string& id) {
  if (probes.count(id) || reader_probes->watching(id)) return true;
  std::vector<OutputInterest> wants;
  {
    std::lock_guard g(listeners_mu);
    for (auto& [t, w] : output_interests) wants.push_back(w);
  }
  for (auto& w : wants)
    if (w(id)) return true;
  return false;
}

void Supervisor::Impl::quiet_unfollowed(const std::string& id) {
  std::uint64_t wants = 0;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || !it->second.output_armed) return;
    wants = it->second.output_wants;
  }
  // Asked without mu: an interest's owner may hold its own lock while it
  // calls in. One that came meanwhile called want_output() after making
  // itself known, so its count voids this decision.
  if (output_followed(id)) return;
  std::lock_guard g(mu);
  auto it = records.find(id);
  if (it != records.end() && it->second.output_armed && it->second.output_wants == wants) arm_output(it->second, false);
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
  if (record_has(id, kStoppingFile)) note_monitor_stopping(r);  // a stop the monitor marked (also at load)
  (void)apply_monitor_record(r);  // a run that ended (restart policy) before the watch
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
    cg.destroy();
  } else if (m && m->pid > 0) {
    killed = kill_orphaned_tree(m->pid, m->pid_start, env_marks);
  }
  // Killed between writing the end and its rename, the monitor left the
  // whole end in exit.json.tmp (reserved blank until then): that is how
  // the command ended, and it is kept.
  const std::string tmp = dir + "/" + atomic_tmp_name(kExitFile);
  if (auto t = read_file(tmp); t.ok() && t.value() && parse_exit(*t.value()))
    if (::rename(tmp.c_str(), (dir + "/" + kExitFile).c_str()) == 0) return;
  const std::string note = "its monitor" + (m ? " (pid " + std::to_string(m->monitor_pid) + ")" : std::string()) +
                           " ended without recording how the command ended; " + std::to_string(killed) +
                           " process(es) left of the command were killed";
  ExitInfo e;
  e.exit_code = -1;
  e.end_reason = "unknown";
  e.finished_at = iso_now();
  e.end_note = note;
  (void)write_file_atomic(dir + "/" + kExitFile, format_exit(e));
}

void Supervisor::Impl::on_monitor_exit(const std::string& id, bool scanned) {
  std::string dir = dir_of(id);
  MonitorInfo m;
  std::vector<std::string> marks;
  bool reruns = true;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || !is_running(it->second.state)) return;
    if (it->second.scanning && !scanned) return;  // the scan's end calls again
    m = it->second.monitor;
    marks = env_marks(it->second);
    reruns = !it->second.spec || it->second.spec->restart != RestartPolicy::no;
  }
  // A command that ended before its probe ran still gets its log checked.
  if (!scanned && !probes.count(id)) start_probe(id);
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
  // The last run's monitor.json, in case its news comes after the end's
  // (restart policy; without one it is never written again after the start).
  std::optional<MonitorInfo> last_run;
  if (reruns)
    if (auto mt = read_file(dir + "/" + kMonitorFile); mt.ok() && mt.value())
      if (auto pm = parse_monitor(*mt.value()); pm && pm.value().monitor_pid == m.monitor_pid) last_run = pm.value();
  ExitInfo info;
  std::optional<Error> err;
  UniqueFd monitor_fd;         // the monitor's pidfd, watched still
  std::vector<int> stale_wds;  // inotify watches of the record
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
    if (it == records.end() || has_ended(it->second.state)) {
      loop->post([this, id] { probe_finish(id); });  // not under mu: a match takes it
      return;
    }
    Record& r = it->second;
    // The watches are dropped from the tables now (what they still report
    // is ignored) and from the kernel after the news: inotify_rm_watch
    // waits for the kernel's workers, about 0.1 ms each on the wake-up's path.
    if (r.pidfd) loop->unwatch(r.pidfd.get());  // watched again once tidying (await_monitor_gone)
    monitor_fd = std::move(r.pidfd);
    if (r.log_wd >= 0) {
      stale_wds.push_back(r.log_wd);
      wd_ids.erase(r.log_wd);
      r.log_wd = -1;
    }
    for (const auto& [wd, name] : r.tail_wds) {  // its tail segments' (log_index.hpp) that the kernel still has
      auto w = wd_ids.find(wd);
      if (w == wd_ids.end() || w->second != id) continue;
      stale_wds.push_back(wd);
      wd_ids.erase(w);
    }
    r.tail_wds.clear();
    if (r.dir_wd >= 0) {
      stale_wds.push_back(r.dir_wd);
      dir_wd_ids.erase(r.dir_wd);
      r.dir_wd = -1;
    }
    drop_stdin(r);
    r.state = transition(r.state, err ? CommandEvent::unreadable : CommandEvent::ended).next;
    r.exit = info;
    if (last_run) {
      r.monitor = *last_run;
      r.monitor.restart_at.clear();  // no run follows
    }
    if (dropped) {
      r.truncated = true;
      r.dropped = *dropped;
    }
    if (err) r.error = err;
    --running;
    if (--active_by_uid[r.owner_uid] == 0) active_by_uid.erase(r.owner_uid);
    note_ended(r);
    r.telling_end = true;
  }
  // Once the record says it ended (an answer a match of the last bytes
  // releases shows the end), and before waiters are told.
  probe_finish(id);
  cpu.forget(id);
  {
    std::lock_guard g(mu);
    if (auto it = records.find(id); it != records.end()) it->second.telling_end = false;
  }
  changed.notify_all();
  // The last output may have been written just before the exit.
  dispatch(Event{Event::Kind::output, id});
  dispatch(Event{Event::Kind::ended, id});
  // The rest is tidying: later, so that the readers just answered get the
  // CPU first, and on a work thread: inotify_rm_watch waits for the
  // kernel's workers (about 0.1 ms), and a look into the cgroup file system
  // waits behind every monitor removing its cgroup at the same moment (the
  // kernel serialises them; 3.8 ms seen with 50 ends at once).
  tidy_later([this, wds = std::move(stale_wds), fd = std::make_shared<UniqueFd>(std::move(monitor_fd)),
              cgroup = m.cgroup] {
    for (const int wd : wds) ::inotify_rm_watch(inotify.get(), wd);
    await_monitor_gone(std::move(*fd), cgroup);
  });
  prune();  // after the news: a reader told of the end may still find the record
  start_queued();  // its place is free
}

void Supervisor::Impl::tidy_later(std::function<void()> task) {
  tidying.push_back(std::move(task));
  if (tidying.size() > 1) return;  // the timer is armed
  loop->add_timer(EventLoop::Clock::now() + std::chrono::milliseconds(1), [this] {
    auto due = std::make_shared<std::vector<std::function<void()>>>();
    due->swap(tidying);
    work->post([due] {
      for (const auto& t : *due) t();
    });
  });
}

void Supervisor::Impl::await_monitor_gone(UniqueFd pidfd, const std::string& cgroup) {
  // The monitor removes the cgroup after its exit.json, just before it
  // exits; one it could not remove (or left when killed) goes once it is
  // gone. A cgroup's name is never used again by a later start (cgroup
  // names count on across daemons), so a cgroup found here is the ended
  // record's own.
  if (cgroup.empty()) return;  // a process tree: nothing to look for (the pidfd closes)
  // Gone already (the usual case, a millisecond after the news): no watch,
  // no wake-up of the event thread when the monitor exits.
  if (!Cgroup(cgroup).exists()) return;
  if (!pidfd) {  // no pidfd (out of descriptors): now
    (void)Cgroup(cgroup).destroy();
    return;
  }
  const int fd = pidfd.get();
  auto owned = std::make_shared<UniqueFd>(std::move(pidfd));
  loop->watch(fd, [this, fd, owned, cgroup] {  // readable: the monitor is gone
    loop->unwatch(fd);
    owned->reset();
    work->post([cg = Cgroup(cgroup)] {
      if (cg.exists()) (void)cg.destroy();
    });
  });
}

void Supervisor::Impl::on_inotify() {
  alignas(inotify_event) char buf[8192];
  std::set<std::string> grown, written, exited, reran;
  for (bool more = true; more;) {
    ssize_t n = ::read(inotify.get(), buf, sizeof buf);
    if (n <= 0) break;
    // Room left for the longest event: the queue was empty (what comes
    // later makes the fd readable again), so no read to learn EAGAIN.
    more = static_cast<std::size_t>(n) > sizeof buf - (sizeof(inotify_event) + NAME_MAX + 1);
    std::lock_guard g(mu);
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      if (auto it = wd_ids.find(ev->wd); it != wd_ids.end()) {
        grown.insert(it->second);
        if (ev->mask & IN_MODIFY) written.insert(it->second);
        if (ev->mask & IN_IGNORED) {  // its file is gone (a tail segment removed)
          if (auto rec = records.find(it->second); rec != records.end()) rec->second.tail_wds.erase(ev->wd);
          wd_ids.erase(it);
        }
      } else if (auto d = dir_wd_ids.find(ev->wd); d != dir_wd_ids.end() && ev->len > 0) {
        if ((ev->mask & IN_MOVED_TO) && std::strcmp(ev->name, "exit.json") == 0) exited.insert(d->second);
        if ((ev->mask & IN_MOVED_TO) && std::strcmp(ev->name, kMonitorFile) == 0) reran.insert(d->second);
        if ((ev->mask & IN_MOVED_TO) && std::strcmp(ev->name, kNotifiedFile) == 0) grown.insert(d->second);
        if ((ev->mask & IN_CREATE) && std::strcmp(ev->name, "dropped") == 0)
          if (auto rec = records.find(d->second); rec != records.end()) rec->second.truncated = true;
        if ((ev->mask & IN_CREATE) && std::strcmp(ev->name, kStoppingFile) == 0)
          if (auto rec = records.find(d->second); rec != records.end()) note_monitor_stopping(rec->second);
        if ((ev->mask & IN_CREATE) && tail_generation_of(ev->name) != 0) {
          if (auto rec = records.find(d->second); rec != records.end() && !has_ended(rec->second.state))
            watch_tail(rec->second, ev->name);
          grown.insert(d->second);
        }
        if ((ev->mask & IN_CREATE) && std::strcmp(ev->name, "log") == 0) {
          if (auto rec = records.find(d->second); rec != records.end() && !has_ended(rec->second.state)) watch_log(rec->second);
          struct stat st {};  // written before its watch? (empty: no news)
          if (::stat((dir_of(d->second) + "/log").c_str(), &st) == 0 && st.st_size > 0) grown.insert(d->second);
        }
      }
      p += sizeof(inotify_event) + ev->len;
    }
  }
  for (auto& id : grown) {
    probe_output(id);
    dispatch(Event{Event::Kind::output, id});
  }
  // Nobody follows what was just written: the next writes wake no one.
  for (auto& id : written) quiet_unfollowed(id);
  for (auto& id : reran) on_monitor_record(id);
  for (auto& id : exited) on_monitor_exit(id);
}

bool Supervisor::Impl::apply_monitor_record(Record& r) {
  if (!is_running(r.state)) return false;
  auto text = read_file(dir_of(r.id) + "/" + kMonitorFile);
  if (!text.ok() || !text.value()) return false;
  auto m = parse_monitor(*text.value());
  // Torn while being replaced: the next rename tells again. Another monitor's: not this record's.
  if (!m || m.value().monitor_pid != r.monitor.monitor_pid) return false;
  const bool new_run = m.value().restarts != r.monitor.restarts;
  r.monitor = m.value();
  // A new run is not frozen (the monitor thaws the cgroup before it), nor
  // stopped (a timeout's stop of the last run is over), even if the news of
  // the delay before it was missed.
  if (new_run && r.state == CommandState::paused) r.state = transition(r.state, CommandEvent::resume_asked).next;
  if (new_run && (r.state == CommandState::stopping || r.state == CommandState::killing))
    r.state = transition(r.state, CommandEvent::run_ended).next;
  r.state = apply_run_state(r.state, r.monitor);
  return new_run;
}

void Supervisor::Impl::on_monitor_record(const std::string& id) {
  bool new_run = false;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end()) return;
    new_run = apply_monitor_record(it->second);
  }
  if (new_run) dispatch(Event{Event::Kind::started, id});
}

}  // namespace sup
