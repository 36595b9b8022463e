// status.json (the supervisor and its running commands) and procs/ID/status.json
// (one record). Generated at open and served from the handle: st_size 0 and
// direct_io, so a reader never sees a snapshot clipped to a stale size
// (NOTES.md §2).
#include <algorithm>

#include "fsd/files.hpp"

namespace fsd {

namespace {

constexpr const char* kHint =
    "write a shell command (or a JSON request) to cmd to start it; "
    "procs/ID/wait blocks until it has ended, procs/ID/log is its output, "
    "echo > procs/ID/stop stops it; see README";

std::string supervisor_status(Filesystem& fs, const Requester& reader) {
  const sup::SupervisorInfo info = fs.sup().info();
  std::vector<sup::CommandStatus> running;
  std::size_t finished = 0;
  for (sup::CommandStatus& st : fs.sup().list()) {
    if (!fs.visible(st, reader)) continue;
    if (st.running)
      running.push_back(std::move(st));
    else if (st.state != "empty")
      ++finished;
  }
  // Oldest first: named commands do not sort by bgId.
  std::stable_sort(running.begin(), running.end(), [](const auto& a, const auto& b) {
    return a.started_at < b.started_at;
  });
  nlohmann::json procs = nlohmann::json::array();
  for (const sup::CommandStatus& st : running) procs.push_back(fs.record_json(st, reader));
  const nlohmann::json j = {
      {"supervisor",
       {{"version", SBX_VERSION},
        {"pid", info.pid},
        {"startedAt", info.started_at},
        {"mountpoint", fs.config().mountpoint},
        {"stateDir", info.state_dir}}},
      {"procs", std::move(procs)},
      {"finished", finished},
      {"hint", kHint},
  };
  return dump_json(j);
}

}  // namespace

std::unique_ptr<Handle> open_status(Filesystem& fs, const Node& node, const Requester& reader) {
  if (node.kind == Kind::status) return std::make_unique<SnapshotHandle>(supervisor_status(fs, reader));
  return std::make_unique<SnapshotHandle>(dump_json(fs.record_json(*node.record, reader)));
}

}  // namespace fsd
