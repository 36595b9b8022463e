// status.json (the box report: the supervisor, its running commands, the
// last actions done through the tree, load, memory, disks) and
// procs/ID/status.json (one record). Generated at open and served from the
// handle: st_size 0 and direct_io, so a reader never sees a snapshot clipped
// to a stale size (NOTES.md §2). The root report never waits: the one slow
// figure (sizes under the working directories) comes from WorkDirSizes' cache.
#include <algorithm>

#include "fsd/files.hpp"

namespace fsd {

namespace {

constexpr const char* kHint =
    "finished commands are left out here: ls procs lists every command, "
    "procs/ID/status.json is one record; write a shell command (or a JSON request) to cmd to start one, "
    "procs/ID/output blocks until it has ended and gives its output; see README";

/// Working directories measured at most (those of the oldest commands).
constexpr std::size_t kMaxWorkDirs = 8;

/// The fields of a running command the root report shows.
nlohmann::json proc_summary(Filesystem& fs, const sup::CommandStatus& st, const Requester& reader) {
  const Config& cfg = fs.config();
  return {
      {"bgId", st.bg_id},
      {"running", st.running},
      {"note", fs.mask(st.note, st.bg_id)},
      {"cmd", fs.mask(st.cmd, st.bg_id)},
      {"startedAt", st.started_at.empty() ? nlohmann::json(nullptr) : nlohmann::json(st.started_at)},
      {"logPath", cfg.mountpoint + "/procs/" + st.bg_id + "/log"},
      {"cpu", st.cpu},
      {"mine", fs.mine(st, reader)},
  };
}

std::string supervisor_status(Filesystem& fs, const Requester& reader) {
  const sup::SupervisorInfo info = fs.sup().info();
  std::vector<sup::CommandStatus> running;
  std::size_t finished = 0;
  if (!fs.config().allow_other) {
    // Everyone sees everything: ended records are counted, not copied
    // (thousands of them made this read slow; bench/RESULTS.md).
    running = fs.sup().list_running(&finished);
  } else {
    for (sup::CommandStatus& st : fs.sup().list()) {
      if (!fs.visible(st, reader)) continue;
      if (st.running)
        running.push_back(std::move(st));
      else if (st.state != "empty")
        ++finished;
    }
  }
  // Oldest first: named commands do not sort by bgId.
  std::stable_sort(running.begin(), running.end(), [](const auto& a, const auto& b) {
    return a.started_at < b.started_at;
  });
  nlohmann::json procs = nlohmann::json::array();
  std::vector<std::string> work_dirs;
  for (const sup::CommandStatus& st : running) {
    procs.push_back(proc_summary(fs, st, reader));
    if (work_dirs.size() < kMaxWorkDirs && !st.cwd.empty() &&
        std::find(work_dirs.begin(), work_dirs.end(), st.cwd) == work_dirs.end())
      work_dirs.push_back(st.cwd);
  }
  nlohmann::json measured = nlohmann::json::array();
  nlohmann::json not_measured = nlohmann::json::array();
  fs.work_dir_sizes().report(work_dirs, measured, not_measured);
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
      {"steps", fs.activity().to_json()},
      {"load", load_json()},
      {"memory", memory_json()},
      {"disk", disk_json(info.state_dir)},
      {"workDirSizes", std::move(measured)},
      {"notMeasured", std::move(not_measured)},
  };
  return dump_json(j);
}

}  // namespace

std::unique_ptr<Handle> open_status(Filesystem& fs, const Node& node, const Requester& reader) {
  if (node.kind == Kind::status) return std::make_unique<SnapshotHandle>(supervisor_status(fs, reader));
  return std::make_unique<SnapshotHandle>(dump_json(fs.record_json(*node.record, reader)));
}

}  // namespace fsd
