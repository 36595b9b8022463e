// Commands queued past max_running (`queue: true`): recorded at once, on
// disk (spec.json and `queued`, which holds the place in the queue), so that
// a daemon that dies loses none; started oldest first as places free (a
// command ends, a start fails), and by a daemon that loads them. A queued
// command that is stopped never runs: its record ends as stopped.
#include "supervisor/starting.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "supervisor/command_env.hpp"
#include "supervisor/ctl_request.hpp"
#include "supervisor/executable_check.hpp"
#include "supervisor/files.hpp"
#include "supervisor/monitor_ctl.hpp"

namespace sup {

namespace {

constexpr const char* kQueuedFile = "queued";

}  // namespace

bool Supervisor::Impl::queued_ahead(uid_t owner) const {
  for (const auto& [seq, id] : queue) {
    const auto it = records.find(id);
    if (it == records.end()) continue;
    // One that waits for a place of its own user's only holds that user back.
    if (it->second.owner_uid == owner || !no_place(it->second.owner_uid)) return true;
  }
  return false;
}

Result<CommandStatus> Supervisor::Impl::enqueue(Starting& s) {
  std::uint64_t seq = 0;
  {
    std::lock_guard g(mu);
    seq = next_queue_seq++;
  }
  // Written now, under another name: in procs/ without `queued`, a record
  // is one that never ran, which the next daemon removes (and whose id it
  // never gives again).
  const std::string pending = std::string(kQueuedFile) + ".new";
  if (Status w = write_file_atomic(s.tmp_dir + "/" + pending, std::to_string(seq) + "\n"); !w) return w.error();
  Record r;
  r.id = s.id;
  r.state = CommandState::queued;
  r.spec = s.spec;
  r.owner_uid = s.spec.requester_uid;
  r.owner_sid = s.spec.requester_sid;
  r.ready_cond = s.spec.ready;
  r.queue_seq = seq;
  if (!s.old_script.empty()) ::unlink(s.old_script.c_str());
  if (s.replacing) {
    std::string del = deletion_dir();
    if (::rename(s.final_dir.c_str(), del.c_str()) == 0) work->post([del] { remove_tree(del); });
  }
  if (::rename(s.tmp_dir.c_str(), s.final_dir.c_str()) != 0) return error_from_errno(errno, "rename " + s.tmp_dir);
  CommandStatus now;
  {
    std::lock_guard g(mu);
    ended_index.erase(s.id);  // a named command that ended is replaced
    r.serial = serial_for(s.id);
    auto it = put_record(s.id, std::move(r));  // listed, queued; not in the queue yet
    ++listing_gen;
    reserved.erase(s.id);
    now = snapshot(it->second);
  }
  // Its step (of this record: open until it ends), then `queued`: a daemon
  // killed at any moment leaves neither a command that runs without its
  // step (the next daemon runs what is queued) nor a step under an id
  // that the next daemon gives again.
  if (s.on_published) s.on_published(now);
  if (::rename((s.final_dir + "/" + pending).c_str(), (s.final_dir + "/" + kQueuedFile).c_str()) != 0) {
    const int err = errno;
    {
      std::lock_guard g(mu);
      if (auto it = records.find(s.id); it != records.end()) drop_record(it);
      ++listing_gen;
    }
    const std::string del = deletion_dir();
    if (::rename(s.final_dir.c_str(), del.c_str()) == 0) work->post([del] { remove_tree(del); });
    return error_from_errno(err, "rename " + s.final_dir + "/" + pending);
  }
  CommandStatus out = now;
  {
    std::lock_guard g(mu);
    // Not if it was stopped or removed meanwhile: it never runs.
    if (auto it = records.find(s.id); it != records.end() && it->second.state == CommandState::queued) {
      queue.emplace(seq, s.id);
      out = snapshot(it->second);
    }
    emit(Event::Kind::started, s.id);
  }
  loop->post([this] { start_queued(); });  // a place may have come free meanwhile
  return out;
}

void Supervisor::Impl::start_queued() {
  for (;;) {
    auto s = std::make_shared<Starting>();
    {
      std::lock_guard g(mu);
      if (closing) return;
      Record* next = nullptr;
      for (const auto& [seq, id] : queue) {
        auto it = records.find(id);
        if (it == records.end() || it->second.launch_token != 0 || reserved.count(id)) continue;
        if (no_place(it->second.owner_uid)) continue;  // full, or that user's share is
        next = &it->second;
        break;
      }
      if (!next || !next->spec || transition(next->state, CommandEvent::place_free).action != CommandAction::launch)
        return;
      s->token = next_start++;
      s->id = next->id;
      s->spec = *next->spec;
      s->from_queue = true;
      s->published = true;  // listed already, as queued
      s->tmp_dir = s->final_dir = dir_of(next->id);
      next->launch_token = s->token;
      queue.erase(next->queue_seq);
      reserved.insert(next->id);
      ++starting;
      ++active_by_uid[next->owner_uid];
    }
    // What was checked when it was queued may have changed since.
    std::map<std::string, std::string> env = command_env(s->spec);
    const std::vector<std::string> argv = s->spec.effective_argv();
    Status ok = check_executable(argv[0], s->spec.cwd, env.count("PATH") ? env["PATH"] : "", own_mount);
    if (!ok) {
      unreserve(s->id, s->spec.requester_uid);
      end_queued(s->id, ok.error(), false);
      continue;
    }
    launch(s, std::move(env), [](const Result<CommandStatus>&) {}, {});
  }
}

bool Supervisor::Impl::requeue(const std::string& id) {
  std::lock_guard g(mu);
  auto it = records.find(id);
  if (it == records.end() || has_ended(it->second.state)) return false;
  Record& r = it->second;
  const std::string dir = dir_of(id);
  // The monitor removes its monitor.json too once the go socket closes.
  ::unlink((dir + "/" + kMonitorFile).c_str());
  if (!write_file_atomic(dir + "/" + kQueuedFile, std::to_string(r.queue_seq) + "\n")) return false;
  r.state = CommandState::queued;
  r.monitor = MonitorInfo{};
  r.launch_token = 0;
  queue.emplace(r.queue_seq, id);
  return true;
}

void Supervisor::Impl::finish_queued(Record& r, const ExitInfo& e) {
  const std::string dir = dir_of(r.id);
  (void)write_file_atomic(dir + "/" + kExitFile, format_exit(e));
  ::unlink((dir + "/" + kQueuedFile).c_str());
  if (r.queue_seq) queue.erase(r.queue_seq);
  r.launch_token = 0;
  r.exit = e;
  r.state = CommandState::exited;
  note_ended(r);
  changed.notify_all();
  emit(Event::Kind::ended, r.id);
  // Its readers' conditions waited for a start that never comes.
  loop->post([this, id = r.id] { reader_probes->finish(id); });
}

void Supervisor::Impl::end_queued(const std::string& id, const Error& why, bool stopped) {
  ExitInfo e;
  e.exit_code = -1;
  e.end_reason = stopped ? "stopped" : "unknown";
  e.finished_at = iso_now();
  if (!stopped) e.end_note = "the queued command could not start: " + why.message;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || has_ended(it->second.state)) return;
    finish_queued(it->second, e);
  }
  loop->post([this] { prune(); });
}

void Supervisor::Impl::stop_queued(Record& r) {
  if (r.launch_token != 0) {
    // Its start is under way: called off (it never runs), or, if it was
    // decided meanwhile, stopped as any running command.
    loop->post([this, token = r.launch_token, id = r.id] {
      if (starts.count(token)) return start_fail(token, interrupted_error());
      std::lock_guard g(mu);
      auto it = records.find(id);
      if (it != records.end() && is_running(it->second.state)) (void)write_ctl(dir_of(id), std::string(kCtlTerm) + "\n");
    });
    return;
  }
  ExitInfo e;
  e.exit_code = -1;
  e.end_reason = "stopped";
  e.finished_at = iso_now();
  finish_queued(r, e);
  loop->post([this] { prune(); });
}

bool Supervisor::Impl::load_queued(Record& r) {
  const std::string dir = dir_of(r.id);
  auto q = read_file(dir + "/" + kQueuedFile);
  if (!q.ok() || !q.value()) return false;
  if (record_has(r.id, kMonitorFile) || record_has(r.id, kExitFile)) {
    // Its start got as far as the monitor: a record like any other now.
    ::unlink((dir + "/" + kQueuedFile).c_str());
    return false;
  }
  r.state = CommandState::queued;
  r.queue_seq = std::strtoull(q.value()->c_str(), nullptr, 10);
  if (r.queue_seq == 0 || queue.count(r.queue_seq)) r.queue_seq = next_queue_seq;  // torn: behind the others
  next_queue_seq = std::max(next_queue_seq, r.queue_seq + 1);
  queue.emplace(r.queue_seq, r.id);
  return true;
}

}  // namespace sup
