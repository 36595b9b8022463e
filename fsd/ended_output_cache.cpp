#include "fsd/ended_output_cache.hpp"

#include "fsd/filesystem.hpp"
#include "fsd/inode.hpp"

namespace fsd {

namespace {

constexpr Kind kOutputKinds[] = {Kind::log, Kind::stdout_log, Kind::stderr_log, Kind::logs_entry};

bool is_output(Kind k) {
  for (Kind o : kOutputKinds)
    if (k == o) return true;
  return false;
}

bool exited(const sup::CommandStatus& st) { return st.state == "exited"; }

}  // namespace

bool EndedOutputCache::allow(const Node& node) {
  if (node.params || !node.record || !is_output(node.kind) || !exited(*node.record)) return false;
  // Past log_max a log is not the same file to every reader (a reader that
  // kept up has read further than a new one finds): its size is asked each
  // time, of the asker's own open file (op_getattr).
  if (node.record->truncated) return false;
  const sup::CommandStatus& then = *node.record;
  {
    std::lock_guard g(mu_);
    serial_of_.try_emplace(then.bg_id, then.serial);
  }
  // A run that began between the resolve and the line above was not seen
  // by changed(): look again, after being remembered (not under mu_: the
  // supervisor's lock is taken by the thread that calls changed()).
  const std::optional<sup::CommandStatus> now = sup_.status(then.bg_id, sup::CpuFigure::skip);
  return now && exited(*now) && now->serial == then.serial && now->started_at == then.started_at &&
         now->log_owner == then.log_owner;
}

void EndedOutputCache::changed(const std::string& id) {
  std::uint64_t serial = 0;
  {
    std::lock_guard g(mu_);
    const auto it = serial_of_.find(id);
    if (it == serial_of_.end()) return;
    serial = it->second;
    serial_of_.erase(it);
  }
  for (Kind k : kOutputKinds) inval_.drop_inode(record_ino(serial, k));
}

}  // namespace fsd
