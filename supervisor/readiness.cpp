// The record's readiness: its probe, the moment it holds, ready.json; and
// the news (output, the end) every probe of a command gets.
#include "supervisor/supervisor_impl.hpp"

#include "supervisor/files.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/log_watch.hpp"
#include "supervisor/notify_record.hpp"
#include "supervisor/ready_record.hpp"

namespace sup {

void Supervisor::Impl::save_ready(const Record& r) const {
  // No fsync: readiness is re-probed after a crash if this is lost (a log
  // match then has the same time: the output's own).
  (void)write_file_atomic(dir_of(r.id) + "/" + kReadyFile,
                          format_ready(ReadyRecord{r.ready_cond, r.ready, r.ready_at, r.ready_match, r.ready_settled}));
}

void Supervisor::Impl::start_probe(const std::string& id) {
  std::optional<ReadyCondition> cond;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || !is_running(it->second.state) || it->second.ready) return;
    cond = it->second.ready_cond;
  }
  probes.erase(id);
  if (cond) {
    std::shared_ptr<LogWatch> log = cond->kind == ReadyCondition::Kind::log ? log_watches->of(id) : nullptr;
    // Writes are reported from before the probe's first look; on the loop
    // thread, where the decision to stop reporting them is taken too.
    if (log) want_output(id);
    probes[id] = ReadinessProbe::start(*loop, *cond, dir_of(id), std::move(log),
                                       [this, id](const ReadyMatch& m) { mark_ready(id, m); });
  }
  // Readers that waited on the old condition through the record's probe
  // now try it themselves.
  reader_probes->record_probe_changed(id);
}

std::optional<ReadyCondition> Supervisor::Impl::record_probe_condition(const std::string& id) {
  auto pr = probes.find(id);
  if (pr == probes.end() || !pr->second) return std::nullopt;
  std::lock_guard g(mu);
  auto it = records.find(id);
  if (it == records.end() || it->second.ready) return std::nullopt;
  return it->second.ready_cond;
}

void Supervisor::Impl::mark_ready(const std::string& id, const ReadyMatch& m, bool news_later) {
  std::optional<ReadyCondition> cond;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || it->second.ready) return;
    it->second.ready = true;
    it->second.ready_at = iso_of_us(m.time_us);
    it->second.ready_match = m;
    cond = it->second.ready_cond;
    save_ready(it->second);
  }
  // Dropping the probe here is safe: it is done and touches nothing after on_ready.
  loop->post([this, id] { if (auto it = probes.find(id); it != probes.end() && it->second) probes.erase(it); });
  if (news_later)
    loop->post([this, id] { dispatch(Event{Event::Kind::ready, id}); });
  else
    dispatch(Event{Event::Kind::ready, id});
  // Readers that wait for a copy of this condition hold with the record,
  // never long after it (their own probe may be on a longer interval).
  // Posted: this may run inside a reader's callback, under its guard.
  if (cond) loop->post([this, id, c = std::move(*cond), m] { reader_probes->held(id, c, m); });
}

void Supervisor::Impl::reader_condition_held(const std::string& id, const ReadyCondition& c, const ReadyMatch& m) {
  bool same = false;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    same = it != records.end() && !it->second.ready && it->second.ready_cond == c;
  }
  // The record's condition is this one: it holds for the record too, and
  // the record says so before this reader's answer does. The news waits
  // until the reader's own callback has run: told now, a reader of an
  // ended command would be answered as ended before its condition is met.
  if (same) mark_ready(id, m, true);
}

void Supervisor::Impl::probe_output(const std::string& id) {
  log_watches->output(id);  // every log condition of the command, in one pass
  if (auto pr = probes.find(id); pr != probes.end()) {
    auto probe = pr->second;
    probe->output();
  }
  reader_probes->output(id);
}

void Supervisor::Impl::probe_finish(const std::string& id) {
  log_watches->finish(id);  // a last line without a newline matches now
  if (auto pr = probes.find(id); pr != probes.end()) {
    auto probe = pr->second;  // finish() may mark ready, which erases it later
    probe->finish();
    probes.erase(id);
  }
  reader_probes->finish(id);
  // Seen to its end and not ready: the next daemon need not look again.
  // Written on the work pool, off the way of the end's news; a record
  // without a condition wakes no worker (it would take the CPU from the
  // end's answer).
  const auto unsettled = [this](const std::string& rid) {
    auto it = records.find(rid);
    return it != records.end() && has_ended(it->second.state) && it->second.ready_cond && !it->second.ready &&
           !it->second.ready_settled;
  };
  {
    std::lock_guard g(mu);
    if (!unsettled(id)) return;
  }
  work->post([this, id, unsettled] {
    std::lock_guard g(mu);
    if (!unsettled(id)) return;
    auto& r = records.find(id)->second;
    r.ready_settled = true;
    save_ready(r);
  });
}

void Supervisor::Impl::settle_ready(const std::string& id) {
  std::optional<ReadyCondition> cond;
  std::vector<std::string> secrets;
  {
    std::lock_guard g(mu);
    auto it = records.find(id);
    if (it == records.end() || !has_ended(it->second.state) || it->second.ready || !it->second.ready_cond) return;
    cond = it->second.ready_cond;
    secrets = secrets_of(&it->second);
  }
  std::erase_if(secrets, [](const std::string& v) { return v.empty(); });
  // What a daemon that ran would have seen: its output, searched whole as
  // at an end (a last line without a newline too), or the readyFd's note.
  // A port or an http server of an ended command has nothing to answer.
  std::optional<ReadyMatch> found;
  if (cond->kind == ReadyCondition::Kind::log) {
    LogWatch whole(dir_of(id), std::move(secrets), secret_blind());
    whole.add(*cond, [&found](const ReadyMatch& m) { found = m; });
    whole.finish();
  } else if (cond->kind == ReadyCondition::Kind::notify) {
    if (auto text = read_file(dir_of(id) + "/" + kNotifiedFile); text.ok() && text.value())
      if (const std::optional<std::int64_t> at = parse_notified(*text.value())) {
        found.emplace();
        found->kind = ReadyCondition::Kind::notify;
        found->time_us = *at;
      }
  }
  std::lock_guard g(mu);
  auto it = records.find(id);
  if (it == records.end() || it->second.ready) return;
  if (found) {
    it->second.ready = true;
    it->second.ready_at = iso_of_us(found->time_us);
    it->second.ready_match = found;
  }
  it->second.ready_settled = true;
  save_ready(it->second);
}

}  // namespace sup
