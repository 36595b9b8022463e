// A start, from its claim to its outcome: staging folder, job, reports, publish, commit or undo.
#include "supervisor/starting.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <future>

#include <nlohmann/json.hpp>

#include "supervisor/access_as.hpp"
#include "supervisor/auto_id.hpp"
#include "supervisor/cgroup_limits.hpp"
#include "supervisor/command_env.hpp"
#include "supervisor/executable_check.hpp"
#include "supervisor/files.hpp"
#include "supervisor/monitor_job.hpp"
#include "supervisor/proc_tree.hpp"
#include "supervisor/utf8.hpp"

namespace sup {

using nlohmann::json;

namespace {

constexpr size_t kMaxInlineScript = 100 * 1024;

}  // namespace

Error interrupted_error() { return Error{Errc::interrupted, "the start was interrupted: nothing was started"}; }
/// At shutdown, how long a start let go to exec is waited for.
constexpr std::chrono::seconds kLetGoWait{5};

Error shutting_down_error() { return Error{Errc::io_error, "the supervisor is shutting down: nothing was started"}; }

void Supervisor::start_async(const StartSpec& spec_in, StartMode mode, StartDone done, std::stop_token stop,
                             StartPublished published) {
  Impl& I = *impl_;
  if (stop.stop_requested()) return done(Error{Errc::interrupted, "the start was interrupted before it began"});
  auto s = std::make_shared<Impl::Starting>();
  s->spec = spec_in;
  s->on_published = std::move(published);
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
  // A folder in the daemon's own mount is not looked at here (own_mount.hpp):
  // the monitor, another process, changes there or says why not.
  if (const std::optional<std::string> real = I.own_mount.outside(spec.cwd)) {
    struct stat st{};
    if (::stat(real->c_str(), &st) != 0) return done(error_from_errno(errno, "cwd '" + spec.cwd + "'"));
    if (!S_ISDIR(st.st_mode)) return done(Error{Errc::not_a_directory, "cwd '" + spec.cwd + "' is not a directory"});
    // The monitor changes there before it drops to the writer's ids: a
    // folder the request names must be one its writer may enter.
    if (spec.run_as && !spec.cwd_is_writers)
      if (auto v = check_searchable_as(*real, *spec.run_as); !v) return done(v.error());
  }
  if (spec.timeout_sec && *spec.timeout_sec <= 0) return done(Error{Errc::invalid_argument, "timeoutSec must be > 0"});
  if (spec.stop_grace_sec < 0) return done(Error{Errc::invalid_argument, "stopGraceSec must be >= 0"});
  if (!spec.name.empty())
    if (auto v = validate_name(spec.name); !v) return done(v.error());
  if (spec.limits)
    if (auto why = limits_refused(*spec.limits, I.cgroups ? &*I.cgroups : nullptr, I.no_cgroup))
      return done(Error{Errc::invalid_argument, *why});

  std::map<std::string, std::string> env = command_env(spec);
  if (auto v = check_executable(argv[0], spec.cwd, env.count("PATH") ? env["PATH"] : "", I.own_mount); !v)
    return done(v.error());

  // Claim the id (and a place under max_running). `done` runs without the lock.
  std::string& id = s->id;
  if (std::optional<Error> refused = I.claim(*s, mode)) return done(std::move(*refused));

  s->final_dir = I.dir_of(id);
  // A name of its own for each attempt: a monitor of an earlier start of
  // this name that was given up (and resumes late) cannot find this folder.
  s->tmp_dir = I.start_dir(id) + "~" + std::to_string(s->token);
  auto fail_early = [&](Error e) {
    remove_tree(s->tmp_dir);
    if (!spec.script_file.empty()) ::unlink(spec.script_file.c_str());
    I.unreserve(id, spec.requester_uid, !s->queue_full);
    done(std::move(e));
    I.spares->refill_later();
  };
  if (const int e = I.spares->make(s->tmp_dir)) {
    I.unreserve(id, spec.requester_uid, !s->queue_full);
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
    sj = spec_to_json(spec);
    sj["bgId"] = id;
    (void)write_file_atomic(s->tmp_dir + "/spec.json", sj.dump() + "\n");
  }
  if (s->queue_full) {
    // Accepted now, started later in order (start_queue.cpp); on disk first,
    // so that a daemon that dies meanwhile loses nothing.
    Result<CommandStatus> queued = I.enqueue(*s);
    if (!queued) return fail_early(queued.error());
    return done(std::move(queued));
  }
  I.launch(s, std::move(env), std::move(done), std::move(stop));
}

void Supervisor::Impl::launch(const std::shared_ptr<Starting>& s, std::map<std::string, std::string> env,
                              StartDone done, std::stop_token stop) {
  Impl& I = *this;
  StartSpec& spec = s->spec;
  const std::string& id = s->id;
  auto argv = spec.effective_argv();
  auto fail_early = [&](Error e) {
    if (!s->cg.empty()) s->cg.remove();
    if (!s->from_queue) remove_tree(s->tmp_dir);
    if (!spec.script_file.empty() && !s->from_queue) ::unlink(spec.script_file.c_str());
    I.unreserve(id, spec.requester_uid);
    if (s->from_queue) end_queued(id, e, false);
    done(std::move(e));
  };

  env["SBX_BGID"] = id;
  MonitorLaunch l;
  l.record_dir = s->tmp_dir;
  l.argv = argv;
  l.env = std::move(env);
  l.cwd = spec.cwd;
  if (spec.run_as) {
    // The monitor is root: a path it resolves can lead where the command's
    // user may not go (a folder of the path swapped for a symlink after
    // the check). The writer's own folder is reached through its /proc
    // link, the folder it is in (a caller that names no process vouches
    // for the path); one the request names, and a queued start's (its
    // writer wrote long ago), is entered again by the command, with its
    // user's rights, before the exec.
    if (!spec.cwd_is_writers || s->from_queue) l.enter_as_user = true;
    else if (spec.requester_pid > 0) l.cwd = "/proc/" + std::to_string(spec.requester_pid) + "/cwd";
  }
  l.timeout_sec = spec.timeout_sec.value_or(0);
  l.grace_sec = spec.stop_grace_sec;
  l.log_max = I.opts.log_max;
  l.run_as = spec.run_as;
  l.stdin_pipe = spec.stdin_pipe;
  l.restart = spec.restart;
  l.restart_delay_sec = spec.restart_delay_sec;
  l.max_restarts = spec.max_restarts;
  if (spec.ready && spec.ready->kind == ReadyCondition::Kind::notify) l.notify_fd = spec.ready->fd;
  // Another user cannot open a file of the state directory: the monitor
  // hands the command its script.
  if (spec.run_as && !spec.script_file.empty()) l.script = spec.script_file;
  // `sleep 30` as text: one process, not dash and its child (simple_command.hpp).
  l.simple = spec.shell.has_value() && spec.script_file.empty();
  if (I.cgroups) {
    // Made (with its limits) before the monitor exists: the command joins it
    // between fork and exec, so none of its processes ever runs outside.
    const std::string name = command_cgroup_name(id, I.cgroup_serial++);
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

std::optional<Error> Supervisor::Impl::no_place(uid_t owner) const {
  if (opts.max_running > 0 && running + starting >= opts.max_running)
    return Error{Errc::try_again, std::to_string(running + starting) +
                                      (running + starting == 1 ? " command is" : " commands are") +
                                      " running, the most allowed at once (max_running=" +
                                      std::to_string(opts.max_running) +
                                      "): stop one, wait for one to end, or ask for \"queue\": true"};
  if (opts.max_running_per_user > 0) {
    const auto mine = active_by_uid.find(owner);
    const std::size_t n = mine == active_by_uid.end() ? 0 : mine->second;
    if (n >= opts.max_running_per_user)
      return Error{Errc::try_again, "uid " + std::to_string(owner) + " runs " + std::to_string(n) +
                                        (n == 1 ? " command" : " commands") +
                                        ", the most one user may run at once (max_running_per_user=" +
                                        std::to_string(opts.max_running_per_user) +
                                        "): stop one, wait for one to end, or ask for \"queue\": true"};
  }
  return std::nullopt;
}

std::optional<Error> Supervisor::Impl::claim(Starting& s, StartMode mode) {
  std::lock_guard g(mu);
  const StartSpec& spec = s.spec;
  if (closing) return Error{Errc::io_error, "the supervisor is shutting down"};
  // With queue: true, behind the queued ones of this user even when a place is free.
  std::optional<Error> full = no_place(spec.requester_uid);
  if (full && !spec.queue) return full;
  s.queue_full = full.has_value() || (spec.queue && queued_ahead(spec.requester_uid));
  if (!spec.name.empty()) {
    s.id = spec.name;
    if (reserved.count(s.id)) return Error{Errc::busy, "'" + s.id + "' is being started"};
    auto it = records.find(s.id);
    if (it != records.end()) {
      if (mode == StartMode::new_only) return Error{Errc::already_exists, "the name '" + s.id + "' is already in use"};
      if (is_pending(it->second.state))  // running, restarting, queued...
        return Error{Errc::busy, "'" + s.id + "' is " + state_name(it->second.state)};
      s.replacing = true;
      if (it->second.spec) s.old_script = it->second.spec->script_file;
    } else if (mode == StartMode::reuse_slot) {
      // procs/NAME/cmd held open across an rmdir of NAME: nothing to run in
      // (a new record would bring back the name, or an automatic id, that
      // was given up).
      return Error{Errc::not_found, "procs/" + s.id + " was removed: there is no slot to run in"};
    }
  } else {
    do {
      s.id = format_auto_id(counter++);
    } while (records.count(s.id) || reserved.count(s.id));
  }
  reserved.insert(s.id);
  s.token = next_start++;
  if (s.queue_full) return std::nullopt;  // no place taken: enqueue() records it
  ++starting;
  ++active_by_uid[spec.requester_uid];
  return std::nullopt;
}

void Supervisor::Impl::unreserve(const std::string& id, uid_t owner, bool had_place) {
  std::lock_guard g(mu);
  reserved.erase(id);
  if (!had_place) return;
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
  arm_start_timer(*s, kReportForked);
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
      auto forked = PendingLaunch::parse(*line, kReportForked);
      if (!forked) return start_fail(token, forked.error());
      if (Status st = start_publish(s, forked.value()); !st) return start_fail(token, st.error());
      if (s.on_published) {
        CommandStatus now;
        {
          std::lock_guard g(mu);
          now = snapshot(records.at(s.id));
        }
        s.on_published(now);
      }
      s.let_go = true;
      arm_start_timer(s, kReportOk);
      s.launch->go();
      // Not before the go: a daemon that dies before it leaves the command
      // cancelled by its monitor, and the record queued still, for the next
      // daemon to start; after it, monitor.json says the record is no
      // longer queued (load_queued).
      if (s.from_queue) ::unlink((s.final_dir + "/queued").c_str());
      continue;
    }
    auto ok = PendingLaunch::parse(*line, kReportOk);
    if (!ok) {
      // Only the monitor's own "err" report says that nothing runs; EOF or
      // garbage (a monitor killed after the go) may leave an exec'd
      // command, which giving up must then kill.
      if (line->rfind(std::string(kReportErr) + " ", 0) == 0) s.let_go = false;
      return start_fail(token, ok.error());
    }
    return start_commit(token);
  }
}

Status Supervisor::Impl::start_publish(Starting& s, pid_t pid) {
  // Published (folder renamed, record listed) once the command is forked
  // and before it may exec: a command that looks at its own record at once
  // (sbx-step, cat procs/$SBX_BGID/status.json) finds it. A queued record
  // is listed in its folder already: it now runs.
  if (s.replacing) {
    std::string held = held_dir(s.id);  // given back at the load if the daemon dies before the command is let go
    if (::rename(s.final_dir.c_str(), held.c_str()) == 0) s.replaced_dir = std::move(held);
  }
  if (!s.from_queue && ::rename(s.tmp_dir.c_str(), s.final_dir.c_str()) != 0) {
    const Error e = error_from_errno(errno, "rename " + s.tmp_dir);
    if (!s.replaced_dir.empty() && ::rename(s.replaced_dir.c_str(), s.final_dir.c_str()) == 0) s.replaced_dir.clear();
    return e;
  }
  MonitorInfo m;
  if (auto mt = read_file(s.final_dir + "/monitor.json"); mt.ok() && mt.value()) {
    if (auto pm = parse_monitor(*mt.value())) m = pm.value();
  }
  if (m.pid == 0) m.pid = pid;
  s.monitor = m;
  std::lock_guard g(mu);
  if (s.from_queue) {
    auto it = records.find(s.id);
    if (it == records.end()) return Error{Errc::not_found, "'" + s.id + "' was removed before it started"};
    it->second.state = transition(it->second.state, CommandEvent::started).next;
    it->second.monitor = m;
    return Ok{};
  }
  ended_index.erase(s.id);  // a named command that ended is replaced
  const auto old = records.find(s.id);  // a slot or an ended run it replaces
  Record r;
  r.id = s.id;
  r.serial = serial_for(s.id);
  r.state = transition(old == records.end() ? CommandState::empty : old->second.state, CommandEvent::started).next;
  r.spec = s.spec;
  r.owner_uid = s.spec.requester_uid;
  r.owner_sid = s.spec.requester_sid;
  r.monitor = m;
  r.ready_cond = s.spec.ready;
  if (old != records.end() && has_ended(old->second.state) && old->second.monitor.monitor_start != 0)
    r.previous_run = std::make_shared<const CommandStatus>(snapshot(old->second));
  // Still reserved: not watched, not pruned. The record it replaces is kept
  // aside while the start may yet fail.
  put_record(s.id, std::move(r), s.replaced_dir.empty() ? nullptr : &s.replaced);
  ++listing_gen;
  s.published = true;
  return Ok{};
}

void Supervisor::Impl::start_commit(std::uint64_t token) {
  std::shared_ptr<Starting> s = start_take(token);
  const std::string id = s->id;
  if (!s->replaced_dir.empty()) work->post([del = s->replaced_dir] { remove_tree(del); });
  if (!s->old_script.empty()) ::unlink(s->old_script.c_str());
  CommandStatus out;
  {
    std::lock_guard g(mu);
    reserved.erase(id);
    --starting;
    ++running;
    auto it = records.find(id);
    it->second.launch_token = 0;
    if (it->second.freeze_after_start) {
      // A STOP written while it started, now that it has exec'd, unless a
      // stop came after it (its TERM must not find the tree frozen); one
      // that cannot be (its cgroup gone) leaves it running, as it shows.
      if (it->second.state == CommandState::paused && Cgroup(it->second.monitor.cgroup).freeze(true) != 0)
        it->second.state = transition(it->second.state, CommandEvent::resume_asked).next;
      it->second.freeze_after_start = false;
    }
    // Queued before the monitor's pidfd is watched, so it is told first.
    emit(Event::Kind::started, id);
    if (s->spec.ready) loop->post([this, id] { start_probe(id); });
    loop->post([this, id] { reader_probes->started(id); });  // a queued command's readers, after the record's
    out = snapshot(it->second);
  }
  cpu.forget(id);
  s->done(std::move(out));
  // The end's watches after the answer, not on its way: this thread sees no
  // event of the command before they are made, and they look once for an
  // end that came first (watch_running).
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it != records.end() && is_running(it->second.state) && it->second.dir_wd < 0 && !it->second.pidfd)
      watch_running(it->second);
  }
  spares->refill_later();  // the folder it took
}

std::shared_ptr<Supervisor::Impl::Starting> Supervisor::Impl::start_take(std::uint64_t token) {
  auto it = starts.find(token);
  std::shared_ptr<Starting> s = std::move(it->second);
  starts.erase(it);
  {
    std::lock_guard g(mu);
    if (closing) starts_left = starts.size();
  }
  starts_ended.notify_all();
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
    // Nothing of it runs on (what was not let go would exit at the go's EOF anyway).
    if (s->cg.destroy(std::chrono::seconds(1)) != 0) work->post([cg = s->cg] { cg.destroy(); });
  }
  if (!s->spec.script_file.empty()) ::unlink(s->spec.script_file.c_str());
  if (s->from_queue) {
    // The record stays: its requester was told its id long ago. Ended; or,
    // when the supervisor closes before the command could exec, queued
    // again for the next one.
    unreserve(s->id, s->spec.requester_uid);
    bool closing_now = false;
    {
      std::lock_guard g(mu);
      closing_now = closing;
    }
    if (closing_now && !s->let_go && requeue(s->id)) return s->done(std::move(e));
    end_queued(s->id, e, e.code == Errc::interrupted);
    s->done(std::move(e));
    return start_queued();
  }
  std::string gone = s->tmp_dir;
  bool restored = false;
  if (s->published) {
    std::lock_guard g(mu);
    if (auto it = records.find(s->id); it != records.end()) drop_record(it);
    save_counter_for(s->id);  // its step names it: never given again
    ++listing_gen;
    gone = deletion_dir();
    if (::rename(s->final_dir.c_str(), gone.c_str()) != 0) gone.clear();
    // The record it was to replace comes back as it was.
    if (s->replaced && !gone.empty() && ::rename(s->replaced_dir.c_str(), s->final_dir.c_str()) == 0) {
      auto it = put_record(s->id, std::move(*s->replaced));
      ++listing_gen;
      if (it->second.state != CommandState::empty) note_ended(it->second);
      restored = true;
    }
  } else if (!s->replaced_dir.empty()) {
    (void)::rename(s->replaced_dir.c_str(), s->final_dir.c_str());
  }
  if (s->published && !restored && !s->replaced_dir.empty()) work->post([del = s->replaced_dir] { remove_tree(del); });
  // A few small files (the command never ran long enough to write much):
  // removed before the caller is told, so a failed start leaves nothing.
  if (!gone.empty()) remove_tree(gone);
  unreserve(s->id, s->spec.requester_uid);
  // Readers that found the new run answer from the old record, or learn it is gone.
  if (s->published) emit(restored ? Event::Kind::ended : Event::Kind::removed, s->id);
  s->done(std::move(e));
  spares->refill_later();
  start_queued();  // its place is free
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
  // Those let go (the go sent: the command may have exec'd) only when the
  // loop cannot run their outcome (called from it).
  auto fail = [&I](bool let_go_too) {
    std::vector<std::uint64_t> tokens;
    for (auto& [token, s] : I.starts)
      if (let_go_too || !s->let_go) tokens.push_back(token);
    for (std::uint64_t t : tokens) I.start_fail(t, shutting_down_error());
    std::lock_guard g(I.mu);
    I.starts_left = I.starts.size();
  };
  if (I.loop->on_loop_thread()) return fail(true);
  auto on_loop = [&I, &fail](bool let_go_too) {
    std::promise<void> done;
    I.loop->post([&] {
      fail(let_go_too);
      done.set_value();
    });
    done.get_future().wait();
  };
  // A start handed to the loop after this task fails in start_begin.
  on_loop(false);
  // The rest end with their report (milliseconds after their go), else
  // within kLetGoWait are killed as a start timeout would (meanwhile the
  // mount is served by no one: not start_timeout's minute).
  bool ended = false;
  {
    std::unique_lock l(I.mu);
    ended = I.starts_ended.wait_for(l, std::min<std::chrono::milliseconds>(I.opts.start_timeout, kLetGoWait),
                                    [&I] { return I.starts_left == 0; });
  }
  // Run after the last start's task (its `done` may still be running as
  // starts_left drops): once it runs, no `done` runs any more.
  on_loop(!ended);
}

}  // namespace sup
