// The record's readiness: its probe, the moment it holds, ready.json.
#include "supervisor/supervisor_impl.hpp"

#include "supervisor/files.hpp"
#include "supervisor/ready_record.hpp"

namespace sup {

void Supervisor::Impl::save_ready(const Record& r) const {
  // No fsync: readiness is re-probed after a crash if this is lost.
  (void)write_file_atomic(dir_of(r.id) + "/" + kReadyFile, format_ready(ReadyRecord{r.ready_cond, r.ready, r.ready_at}));
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

}  // namespace sup
