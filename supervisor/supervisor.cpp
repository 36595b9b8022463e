// The facade: each public call checks its arguments under the lock and
// hands the work to the part that does it (supervisor_impl.hpp lists them).
#include "supervisor/supervisor.hpp"

#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <future>

#include "supervisor/cgroup.hpp"
#include "supervisor/ctl_request.hpp"
#include "supervisor/files.hpp"
#include "supervisor/log_watch.hpp"
#include "supervisor/monitor_ctl.hpp"
#include "supervisor/proc_tree.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/slot_record.hpp"
#include "supervisor/start_folder.hpp"
#include "supervisor/supervisor_impl.hpp"

namespace sup {

namespace fs = std::filesystem;

Supervisor::Supervisor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Supervisor::~Supervisor() {
  cancel_starts();  // their commands never run; their callers are told
  // Probes belong to the loop thread and unregister from the loop when they
  // go: drop them there, then stop the loop (its callbacks use the rest of Impl).
  std::promise<void> dropped;
  impl_->loop->post([this, &dropped] {
    impl_->probes.clear();
    impl_->reader_probes->clear();
    impl_->log_watches->clear();
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
  impl->own_mount = OwnMount(impl->opts.own_mount);
  impl->procs_dir = impl->opts.state_dir + "/procs";
  impl->staging_dir = impl->opts.state_dir + "/staging";
  impl->inotify.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!impl->inotify) return error_from_errno(errno, "inotify_init1");
  try {
    impl->loop = std::make_unique<EventLoop>();
    Impl* ip = impl.get();
    impl->log_watches = std::make_unique<LogWatches>(
        [ip](const std::string& id) { return ip->dir_of(id); },
        [ip](const std::string& id) {
          std::lock_guard g(ip->mu);
          auto it = ip->records.find(id);
          return ip->secrets_of(it == ip->records.end() ? nullptr : &it->second);
        },
        impl->secret_blind());
    impl->reader_probes = std::make_unique<ReaderProbes>(
        *impl->loop, *impl->log_watches, [ip](const std::string& id) { ip->want_output(id); },
        [ip](const std::string& id) { return ip->record_probe_condition(id); });
  } catch (const std::exception& e) {
    return Error{Errc::try_again, e.what()};
  }
  // One thread leaves a core to the event thread on a small machine.
  impl->work = std::make_unique<WorkPool>(std::max(1u, std::thread::hardware_concurrency() / 2));
  // The spares taken are made again 50 ms later, on the work pool
  // (spare_folders.hpp); each holds the files a start creates in its
  // folder (start_folder.hpp).
  impl->spares = std::make_unique<SpareFolders>(
      impl->staging_dir, kStartFolderSpares,
      [ip = impl.get()](std::function<void()> t) {
        ip->loop->add_timer(EventLoop::Clock::now() + std::chrono::milliseconds(50),
                            [ip, t = std::move(t)] { ip->work->post(t); });
      },
      prepare_start_folder);
  Impl* p = impl.get();
  impl->loop->watch(impl->inotify.get(), [p] { p->on_inotify(); });
  // How new commands are tracked, decided once; a hierarchy given by name must work.
  // The subtree is named after the state directory itself, however its path
  // is spelt (through a link): the next daemon there takes the subtree over.
  std::error_code canon_err;
  const std::filesystem::path state = std::filesystem::weakly_canonical(impl->opts.state_dir, canon_err);
  impl->cgroups = find_cgroup_hierarchy(impl->opts.cgroup, cgroup_key(canon_err ? impl->opts.state_dir : state.string()),
                                        &impl->no_cgroup, impl->opts.cgroup_companions);
  if (!impl->cgroups && !impl->opts.cgroup.empty() && impl->opts.cgroup != "off")
    return Error{Errc::invalid_argument, "cgroup=" + impl->opts.cgroup + ": " + impl->no_cgroup};
  // Before load(): a command it takes back may end while it loads, and its
  // end starts what is queued (on the event thread).
  impl->launcher = std::make_unique<MonitorLauncher>(impl->opts.monitor_path);
  impl->launcher->prestart();
  if (auto st = impl->load(); !st) return st.error();
  impl->spares->refill_later();  // after load(), which clears staging/ of what a dead daemon left
  impl->prune();  // the limits may be lower than last time, or records aged meanwhile
  impl->loop->post([p] { p->start_queued(); });  // what was queued when the last daemon went
  return std::unique_ptr<Supervisor>(new Supervisor(std::move(impl)));
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
  if (const int e = I.spares->make_empty(tmp)) {  // a slot's folder holds its slot file only
    st = error_from_errno(e, "mkdir " + tmp);
  } else {
    st = write_file_atomic(tmp + "/" + kSlotFile, format_slot(SlotOwner{owner_uid, owner_sid}));
    if (st && ::rename(tmp.c_str(), I.dir_of(name).c_str()) != 0) st = error_from_errno(errno, "rename " + tmp);
  }
  I.spares->refill_later();
  std::lock_guard g(I.mu);
  I.reserved.erase(name);
  if (!st) {
    remove_tree(tmp);
    return st.error();
  }
  Record r;
  r.id = name;
  r.serial = I.serial_for(name);
  r.state = CommandState::empty;
  r.owner_uid = owner_uid;
  r.owner_sid = owner_sid;
  auto it = I.put_record(name, std::move(r));
  ++I.listing_gen;
  I.emit(Event::Kind::started, name);
  return I.snapshot(it->second);
}

Status Supervisor::stop(const std::string& id) {
  std::lock_guard g(impl_->mu);
  auto it = impl_->records.find(id);
  if (it == impl_->records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
  // The table says whether there is anything to stop. Between runs the
  // monitor ends the policy at once (end_policy): its exit.json follows.
  const Transition t = transition(it->second.state, CommandEvent::stop_asked);
  const CommandAction action = t.action;
  if (it->second.state == CommandState::queued && action == CommandAction::record_end) {
    impl_->stop_queued(it->second);  // it never runs
    return Ok{};
  }
  if (action != CommandAction::send_term && action != CommandAction::end_policy) return Ok{};
  Status sent = write_ctl(impl_->dir_of(id), std::string(kCtlTerm) + "\n");
  // Stopping (shown as running), a paused one too: the monitor thaws it to
  // deliver the TERM, and a STOP now would only hold the stop up.
  if (sent && action == CommandAction::send_term) it->second.state = t.next;
  return sent;
}

Status Supervisor::signal(const std::string& id, int sig) {
  if (sig < 1 || sig > SIGRTMAX) return Error{Errc::invalid_argument, "no signal " + std::to_string(sig)};
  std::lock_guard g(impl_->mu);
  auto it = impl_->records.find(id);
  if (it == impl_->records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
  Record& r = it->second;
  if (Status st = check_started(id, r); !st) return st;
  // A stop this daemon did not send (a timeout's, or one from before a
  // restart) is known by the monitor's mark: looked at here too, so a STOP
  // written after the mark finds it whether or not its news came.
  if (sig == SIGSTOP && impl_->record_has(id, kStoppingFile)) Impl::note_monitor_stopping(r);
  if (sig == SIGSTOP && (r.state == CommandState::stopping || r.state == CommandState::killing))
    return Error{Errc::busy, "'" + id + "' is being stopped: a STOP would only hold that up (its grace would end in SIGKILL)"};
  if (sig == SIGSTOP || sig == SIGCONT) {
    // With a cgroup, STOP freezes every member (none can undo it, none is
    // missed) and CONT thaws them; CONT is still sent, for one stopped by itself.
    const Transition t = transition(r.state, sig == SIGSTOP ? CommandEvent::pause_asked : CommandEvent::resume_asked);
    const std::string& cg = r.monitor.cgroup;
    const bool freezes = !cg.empty() && (t.action == CommandAction::freeze || t.action == CommandAction::thaw);
    if (freezes && (impl_->reserved.count(id) || r.launch_token != 0))
      r.freeze_after_start = t.action == CommandAction::freeze;  // being started: start_commit freezes it
    else if (freezes)
      if (int e = Cgroup(cg).freeze(t.action == CommandAction::freeze))
        return error_from_errno(e, "cannot write " + cg + "/cgroup.freeze");
    r.state = t.next;
    if (!cg.empty() && sig == SIGSTOP) return Ok{};
  }
  return write_ctl(impl_->dir_of(id), kCtlSignal + std::to_string(sig) + "\n");
}

Status Supervisor::set_ready(const std::string& id, const ReadyCondition& c) {
  Impl& I = *impl_;
  {
    std::lock_guard g(I.mu);
    auto it = I.records.find(id);
    if (it == I.records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
    if (Status st = check_started(id, it->second); !st) return st;
    // Once ready, it stays ready: readyWhen, readyAt and matched keep what held.
    if (it->second.ready) return Ok{};
    it->second.ready_cond = c;
    I.save_ready(it->second);
  }
  // A log condition is searched in the log as it is now before the writer
  // is answered: a status.json read after the write says whether it held.
  // The probe then follows the new output (it finds the record ready, if so).
  if (c.kind == ReadyCondition::Kind::log) {
    std::optional<ReadyMatch> found;
    LogWatch now(I.dir_of(id), secrets(id), I.secret_blind());
    now.add(c, [&found](const ReadyMatch& m) { found = m; });
    now.output();
    if (found) I.mark_ready(id, *found, true);
  }
  I.loop->post([&I, id] { I.start_probe(id); });
  return Ok{};
}

Result<std::uint64_t> Supervisor::probe_for_reader(const std::string& id, const ReadyCondition& c,
                                                   std::function<void(const ReadyMatch&)> on_ready) {
  Impl& I = *impl_;
  auto stage = [&I, id] {
    std::lock_guard g(I.mu);
    auto it = I.records.find(id);
    if (it == I.records.end()) return ReaderProbes::Stage::over;
    if (it->second.state == CommandState::queued) return ReaderProbes::Stage::queued;
    return is_running(it->second.state) ? ReaderProbes::Stage::running : ReaderProbes::Stage::over;
  };
  bool over = false;
  {
    std::lock_guard g(I.mu);
    auto it = I.records.find(id);
    if (it == I.records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
    over = has_ended(it->second.state);
    // A queued command's readers wait for its start (ReaderProbes::started).
    if (Status st = check_started(id, it->second); !over && it->second.state != CommandState::queued && !st)
      return st.error();
  }
  if (over) {
    // Nothing more comes: a log condition is searched in the whole log now,
    // as the record's own was at the end (a last line of any length too);
    // a port or an http server of an ended command has nothing to probe.
    if (c.kind == ReadyCondition::Kind::log) {
      std::optional<ReadyMatch> found;
      LogWatch whole(I.dir_of(id), secrets(id), I.secret_blind());
      whole.add(c, [&found](const ReadyMatch& m) { found = m; });
      whole.finish();
      if (found) on_ready(*found);
    }
    return std::uint64_t{0};  // no probe to cancel
  }
  auto held = [&I, id, c, on_ready = std::move(on_ready)](const ReadyMatch& m) {
    I.reader_condition_held(id, c, m);
    on_ready(m);
  };
  return I.reader_probes->add(id, c, I.dir_of(id), std::move(held), stage);
}

void Supervisor::cancel_probe(std::uint64_t token) { impl_->reader_probes->cancel(token); }

Status Supervisor::remove(const std::string& id) {
  Impl& I = *impl_;
  std::string del;
  std::uint64_t serial = 0;
  {
    std::lock_guard g(I.mu);
    auto it = I.records.find(id);
    if (it == I.records.end()) return Error{Errc::not_found, "no command '" + id + "'"};
    if (is_running(it->second.state)) return Error{Errc::busy, "'" + id + "' is running; stop it first"};
    if (I.reserved.count(id)) return Error{Errc::busy, "'" + id + "' is being started"};
    Status err = Ok{};
    serial = it->second.serial;
    del = I.detach(it, &err);
    if (del.empty()) return err;
    I.arm_retention_timer();
  }
  remove_tree(del);
  I.changed.notify_all();
  I.emit(Event::Kind::removed, id, serial);
  return Ok{};
}

std::optional<uid_t> Supervisor::owner_of(const std::string& id) const {
  std::lock_guard g(impl_->mu);
  auto it = impl_->records.find(id);
  if (it == impl_->records.end()) return std::nullopt;
  return it->second.owner_uid;
}

bool Supervisor::in_tree(const std::string& id, pid_t pid) const {
  MonitorInfo m;
  {
    std::lock_guard g(impl_->mu);
    auto it = impl_->records.find(id);
    if (it == impl_->records.end()) return false;
    m = it->second.monitor;
  }
  if (m.monitor_pid <= 0) return false;
  if (!m.cgroup.empty()) {
    // One read: the command's cgroup holds its whole tree (a writer from
    // outside, the common case, costs no walk up its parents).
    const std::optional<std::string> text = read_cgroup_file("/proc/" + std::to_string(pid) + "/cgroup");
    const std::size_t at = text ? text->find("0::/") : std::string::npos;
    if (at == std::string::npos || (at != 0 && (*text)[at - 1] != '\n')) return false;
    std::string own = text->substr(at + 3);
    own.erase(std::min(own.find('\n'), own.size()));
    // Its own cgroup or one below it (a command may make some): the
    // command's path in the hierarchy ends the full path the record keeps.
    for (; own.size() > 1; own.erase(own.rfind('/')))
      if (m.cgroup.ends_with(own)) return true;
    return false;
  }
  // Up the parents; a chain deeper than this is no command's (pid_max
  // bounds it anyway, and a loop cannot be: a parent is older).
  ProcStat st;
  for (int depth = 0; depth < 4096 && pid > 1 && read_proc_stat(pid, &st); ++depth) {
    if (st.ppid == m.monitor_pid) return process_start_time(m.monitor_pid) == m.monitor_start;
    pid = st.ppid;
  }
  return false;
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

std::optional<CommandStatus> Supervisor::run_status(const std::string& id, std::uint64_t log_owner) const {
  std::shared_ptr<const CommandStatus> previous;
  {
    std::lock_guard g(impl_->mu);
    auto it = impl_->records.find(id);
    if (it == impl_->records.end()) return std::nullopt;
    previous = it->second.previous_run;
  }
  if (std::optional<CommandStatus> now = status(id); now && now->log_owner == log_owner) return now;
  if (previous && previous->log_owner == log_owner) return *previous;
  return std::nullopt;
}

void Supervisor::notice_run(const std::string& id) {
  bool new_run = false;
  {
    std::lock_guard g(impl_->mu);
    auto it = impl_->records.find(id);
    if (it == impl_->records.end()) return;
    new_run = impl_->apply_monitor_record(it->second);  // one small file, as the event thread reads it
  }
  // Posted: listeners hear events on the event thread.
  if (new_run) impl_->emit(Event::Kind::started, id);
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

std::vector<RecordEntry> Supervisor::entries(std::uint64_t* generation) const {
  std::lock_guard g(impl_->mu);
  if (generation) *generation = impl_->listing_gen;
  return impl_->listing.entries();
}

std::uint64_t Supervisor::listing_generation() const {
  std::lock_guard g(impl_->mu);
  return impl_->listing_gen;
}

std::vector<std::pair<std::string, Error>> Supervisor::load_errors() const { return impl_->load_errors; }

std::vector<EndedEntry> Supervisor::ended_entries(std::optional<uid_t> owner) const {
  std::vector<EndedEntry> out;
  std::lock_guard g(impl_->mu);
  for (auto& [id, r] : impl_->records) {
    if (shown_state(r) == CommandState::empty || !has_ended(shown_state(r))) continue;  // as list_running() counts them
    if (owner && r.owner_uid != *owner) continue;
    out.push_back(EndedEntry{id, r.serial, r.owner_uid, r.monitor.started_at, r.exit.finished_at});
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
    rest = impl_->live.walk(owner, [&](const Record& r) {
      out.push_back(impl_->snapshot(r));
      monitors.push_back(r.monitor.monitor_pid);
    });
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

const std::vector<std::string>& Supervisor::starts_never_let_go() const { return impl_->never_let_go; }

std::optional<CommandStatus> Supervisor::wait(const std::string& id, std::chrono::milliseconds timeout) {
  {
    std::unique_lock g(impl_->mu);
    impl_->changed.wait_for(g, timeout, [&] {
      auto it = impl_->records.find(id);
      return it == impl_->records.end() || (!is_pending(it->second.state) && !it->second.telling_end);
    });
  }
  return status(id);
}

std::optional<CommandStatus> Supervisor::stop_and_wait(const std::string& id, std::chrono::milliseconds timeout) {
  if (!stop(id)) return status(id);
  return wait(id, timeout);
}

std::uint64_t Supervisor::subscribe(Listener l, OutputInterest follows) {
  std::lock_guard g(impl_->listeners_mu);
  auto t = impl_->next_token++;
  impl_->listeners.emplace_back(t, std::move(l));
  if (follows) impl_->output_interests.emplace_back(t, std::move(follows));
  return t;
}

void Supervisor::unsubscribe(std::uint64_t token) {
  std::lock_guard g(impl_->listeners_mu);
  std::erase_if(impl_->listeners, [&](auto& p) { return p.first == token; });
  std::erase_if(impl_->output_interests, [&](auto& p) { return p.first == token; });
}

void Supervisor::want_output(const std::string& id) { impl_->want_output(id); }

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

std::size_t Supervisor::secret_blind() const { return impl_->secret_blind(); }

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
