// status.json (the box report: the supervisor, its running commands, the
// last actions done through the tree, load, memory, disks) and
// procs/ID/status.json (one record). Generated at open and served from the
// handle: st_size 0 and direct_io, so a reader never sees a snapshot clipped
// to a stale size (NOTES.md §2). The root report never waits: the one slow
// figure (sizes under the working directories) comes from WorkDirSizes' cache.
//
// Parameters in the name: `status.json,all` lists ended commands too (oldest
// first, with how they ended); `status.json,tailBytes=N` gives each entry
// (root) or the record (procs/ID) a `logTail` of the last N bytes of its log.
#include <algorithm>

#include "fsd/files.hpp"

namespace fsd {

namespace {

constexpr const char* kHint =
    "finished commands are left out here: status.json,all lists them too, ls procs lists every command, "
    "procs/ID/status.json is one record; write a shell command (or a JSON request) to cmd to start one, "
    "procs/ID/output blocks until it has ended and gives its output; see README";
constexpr const char* kHintAll =
    "every command, oldest first; procs/ID/status.json is one record; write a shell command (or a JSON "
    "request) to cmd to start one, procs/ID/output blocks until it has ended and gives its output; see README";

/// Working directories measured at most (those of the oldest commands).
constexpr std::size_t kMaxWorkDirs = 8;

nlohmann::json null_if_empty(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

/// An entry of the root list: the seed's fields where they apply (how it
/// ended once it has; the condition when it has one). The record's note
/// and cmd come masked with its secrets already.
nlohmann::json proc_summary(Filesystem& fs, const sup::CommandStatus& st, const Requester& reader) {
  const Config& cfg = fs.config();
  nlohmann::json j = {
      {"bgId", st.bg_id},
      {"running", st.running},
      {"state", st.state},
      {"note", st.note},
      {"cmd", st.cmd},
      {"cwd", st.cwd},
      {"pid", st.pid > 0 ? nlohmann::json(st.pid) : nlohmann::json(nullptr)},
      {"startedAt", null_if_empty(st.started_at)},
      {"logPath", cfg.mountpoint + "/procs/" + st.bg_id + "/log"},
      {"mine", fs.mine(st, reader)},
      {"cpu", st.cpu},
  };
  if (!st.running) {
    j["exitCode"] = st.exit_code ? nlohmann::json(*st.exit_code) : nlohmann::json(nullptr);
    j["signal"] = null_if_empty(st.signal);
    j["endReason"] = null_if_empty(st.end_reason);
    j["finishedAt"] = null_if_empty(st.finished_at);
  }
  if (!st.ready_when.empty()) {
    j["readyWhen"] = st.ready_when;
    j["ready"] = st.ready;
    j["readyAt"] = null_if_empty(st.ready_at);
  }
  return j;
}

/// The commands of the root list: running ones, or with `all` every
/// command (not the empty slots), and how many have ended.
std::vector<sup::CommandStatus> listed(Filesystem& fs, const Requester& reader, bool all, std::size_t* finished) {
  // Without `all`, ended records are counted, not copied (thousands of them
  // made this read slow; bench/RESULTS.md). With allow_other a user sees their own.
  if (!all)
    return fs.sees_all(reader) ? fs.sup().list_running(finished) : fs.sup().list_running(finished, reader.uid);
  std::vector<sup::CommandStatus> every = fs.sup().list();
  std::erase_if(every, [&](const sup::CommandStatus& st) { return st.state == "empty" || !fs.visible(st, reader); });
  *finished = static_cast<std::size_t>(
      std::count_if(every.begin(), every.end(), [](const sup::CommandStatus& st) { return !st.running; }));
  return every;
}

std::string supervisor_status(Filesystem& fs, const Node& node, const Requester& reader) {
  const sup::SupervisorInfo info = fs.sup().info();
  const bool all = node.keys().has("all");
  const std::optional<std::int64_t> tail_bytes = node.keys().number("tailBytes");
  std::size_t finished = 0;
  std::vector<sup::CommandStatus> running = listed(fs, reader, all, &finished);
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
    if (tail_bytes) procs.back()["logTail"] = fs.log_tail(st, static_cast<std::size_t>(*tail_bytes));
    if (!st.running) continue;  // only running commands' folders are measured
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
        {"stateDir", info.state_dir},
        {"paramNodes", fs.param_nodes().size()}}},
      {"procs", std::move(procs)},
      {"finished", finished},
      {"hint", all ? kHintAll : kHint},
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
  if (node.kind == Kind::status) return std::make_unique<SnapshotHandle>(supervisor_status(fs, node, reader));
  // The node's record was looked up without a CPU sample; this file shows one.
  const std::optional<sup::CommandStatus> st = fs.sup().status(node.id());
  const sup::CommandStatus& record = st ? *st : *node.record;
  nlohmann::json j = fs.record_json(record, reader);
  if (const std::optional<std::int64_t> n = node.keys().number("tailBytes"))
    j["logTail"] = fs.log_tail(record, static_cast<std::size_t>(*n));
  return std::make_unique<SnapshotHandle>(dump_json(j));
}

}  // namespace fsd
