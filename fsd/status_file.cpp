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
#include "fsd/json_object_writer.hpp"

namespace fsd {

namespace {

constexpr const char* kHint =
    "finished commands are left out here: status.json,all lists them too, ls procs lists every command, "
    "procs/ID/status.json is one record; write a shell command (or a JSON request) to cmd to start one, "
    "procs/ID/output blocks until it has ended and gives its output; see README";
constexpr const char* kHintAll =
    "every command, oldest first; procs/ID/status.json is one record; write a shell command (or a JSON "
    "request) to cmd to start one, procs/ID/output blocks until it has ended and gives its output; see README";

/// Stands for the list in the dump.
constexpr const char* kProcsMark = "\x01procs\x01";

/// Working directories measured at most (those of the oldest commands).
constexpr std::size_t kMaxWorkDirs = 8;

/// An entry of the root list, on one line: the seed's fields where they
/// apply (how it ended once it has; the condition when it has one), and
/// `logTail` when asked for. The record's note and cmd come masked with its
/// secrets already. Written without a nlohmann::json per entry:
/// status.json,all lists thousands.
void proc_summary(std::string& out, Filesystem& fs, const sup::CommandStatus& st, const Requester& reader,
                  std::optional<std::int64_t> tail_bytes) {
  JsonObjectWriter w(out);
  w.str("bgId", st.bg_id)
      .boolean("running", st.running)
      .str("state", st.state)
      .str("note", st.note)
      .str("cmd", st.cmd)
      .str("cwd", st.cwd)
      .num_or_null("pid", st.pid > 0 ? std::optional<std::int64_t>(st.pid) : std::nullopt)
      .str_or_null("startedAt", st.started_at)
      .str("logPath", fs.config().mountpoint + "/procs/" + st.bg_id + "/log")
      .boolean("mine", fs.mine(st, reader))
      .num("cpu", st.cpu);
  if (!st.running) {
    w.num_or_null("exitCode", st.exit_code ? std::optional<std::int64_t>(*st.exit_code) : std::nullopt)
        .str_or_null("signal", st.signal)
        .str_or_null("endReason", st.end_reason)
        .str_or_null("finishedAt", st.finished_at);
  }
  if (!st.ready_when.empty()) w.str("readyWhen", st.ready_when).boolean("ready", st.ready).str_or_null("readyAt", st.ready_at);
  if (tail_bytes) w.str("logTail", fs.log_tail(st, static_cast<std::size_t>(*tail_bytes)));
  w.close();
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
  // The list is spliced into the dump below in place of kProcsMark, one
  // entry a line, indented as the dump indents.
  std::string procs = "[";
  procs.reserve(order.size() * (tail_bytes ? 512 + static_cast<std::size_t>(*tail_bytes) : 512));
  std::vector<std::string> work_dirs;
  for (const sup::CommandStatus* p : order) {
    const sup::CommandStatus& st = *p;
    procs += procs.size() == 1 ? "\n    " : ",\n    ";
    proc_summary(procs, fs, st, reader, tail_bytes);
    if (!st.running) continue;  // only running commands' folders are measured
    if (work_dirs.size() < kMaxWorkDirs && !st.cwd.empty() &&
        std::find(work_dirs.begin(), work_dirs.end(), st.cwd) == work_dirs.end())
      work_dirs.push_back(st.cwd);
  }
  nlohmann::json measured = nlohmann::json::array();
  nlohmann::json not_measured = nlohmann::json::array();
  fs.work_dir_sizes().report(work_dirs, measured, not_measured);
  procs += procs.size() == 1 ? "]" : "\n  ]";
  const nlohmann::json j = {
      {"supervisor",
       {{"version", SBX_VERSION},
        {"pid", info.pid},
        {"startedAt", info.started_at},
        {"mountpoint", fs.config().mountpoint},
        {"stateDir", info.state_dir},
        {"paramNodes", fs.param_nodes().size()}}},
      {"procs", kProcsMark},
      {"finished", finished},
      {"hint", all ? kHintAll : kHint},
      {"steps", fs.activity().to_json()},
      {"load", load_json()},
      {"memory", memory_json()},
      {"disk", disk_json(info.state_dir)},
      {"workDirSizes", std::move(measured)},
      {"notMeasured", std::move(not_measured)},
  };
  std::string text = dump_json(j);
  // With its key: the quotes around it are the dump's own, never in a string.
  const std::string mark = "\"procs\": " + nlohmann::json(kProcsMark).dump();
  if (const std::size_t at = text.find(mark); at != std::string::npos)
    text.replace(at, mark.size(), "\"procs\": " + procs);
  return text;
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
