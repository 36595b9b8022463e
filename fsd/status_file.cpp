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

/// The fields of a running command the root report shows. The record's
/// note and cmd come masked with its secrets already.
nlohmann::json proc_summary(Filesystem& fs, const sup::CommandStatus& st, const Requester& reader) {
  const Config& cfg = fs.config();
  return {
      {"bgId", st.bg_id},
      {"running", st.running},
      {"note", st.note},
      {"cmd", st.cmd},
      {"startedAt", st.started_at.empty() ? nlohmann::json(nullptr) : nlohmann::json(st.started_at)},
      {"logPath", cfg.mountpoint + "/procs/" + st.bg_id + "/log"},
      {"cpu", st.cpu},
      {"mine", fs.mine(st, reader)},
      {"client", st.client.empty() ? nlohmann::json(nullptr) : nlohmann::json(st.client)},
  };
}

std::string supervisor_status(Filesystem& fs, const Requester& reader) {
  const sup::SupervisorInfo info = fs.sup().info();
  // Ended records are counted, not copied (thousands of them made this
  // read slow; bench/RESULTS.md). With allow_other a user sees their own.
  std::size_t finished = 0;
  std::vector<sup::CommandStatus> running =
      fs.sees_all(reader) ? fs.sup().list_running(&finished) : fs.sup().list_running(&finished, reader.uid);
  // Oldest first: named commands do not sort by bgId. Pointers are sorted,
  // not the records (moving a thousand of them showed in the profile).
  std::vector<const sup::CommandStatus*> order;
  order.reserve(running.size());
  for (const sup::CommandStatus& st : running) order.push_back(&st);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->started_at < b->started_at;
  });
  nlohmann::json procs = nlohmann::json::array();
  std::vector<std::string> work_dirs;
  for (const sup::CommandStatus* p : order) {
    const sup::CommandStatus& st = *p;
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
      {"steps", fs.box_steps().latest()},
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
  // The node's record was looked up without a CPU sample; this file shows one.
  const std::optional<sup::CommandStatus> st = fs.sup().status(node.id());
  return std::make_unique<SnapshotHandle>(dump_json(fs.record_json(st ? *st : *node.record, reader)));
}

}  // namespace fsd
