// status.json (the box report: the supervisor, its running commands, the
// last actions done through the tree, load, memory, disks) and
// procs/ID/status.json (one record). Generated at open and served from the
// handle: st_size 0 and direct_io, so a reader never sees a snapshot clipped
// to a stale size (with the page cache and a real size, the kernel clips a
// read to the size it cached, and a longer new snapshot reads as truncated JSON). The root report never waits: the one slow
// figure (sizes under the working directories) comes from WorkDirSizes' cache.
//
// Parameters in the name: `status.json,all` lists ended commands too (oldest
// first, with how they ended); `status.json,tailBytes=N` gives each entry
// (root) or the record (procs/ID) a `logTail` of the last N bytes of its log.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "fsd/files.hpp"
#include "fsd/ended_lines.hpp"
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
/// apply (how it ended once it has; the condition when it has one). The
/// record's note and cmd come masked with its secrets already. Written
/// without a nlohmann::json per entry (status.json,all lists thousands), in
/// two pieces around the value of `mine` (EndedLines keeps them), the
/// object left open for `logTail`.
void summary_pieces(const Filesystem& fs, const sup::CommandStatus& st, std::string& head, std::string& rest) {
  JsonObjectWriter(head)
      .str("bgId", st.bg_id)
      .boolean("running", st.running)
      .str("state", st.state)
      .str("note", st.note)
      .str("cmd", st.cmd)
      .str("cwd", st.cwd)
      .num_or_null("pid", st.pid > 0 ? std::optional<std::int64_t>(st.pid) : std::nullopt)
      .str_or_null("startedAt", st.started_at)
      .str("logPath", fs.config().mountpoint + "/procs/" + st.bg_id + "/log");
  head += ", \"mine\": ";
  JsonObjectWriter w(rest, JsonObjectWriter::More{});
  w.str_or_null("client", st.client).num("cpu", st.cpu);
  if (!st.tracking.empty()) w.str("tracking", st.tracking);
  if (st.over()) {
    w.num_or_null("exitCode", st.exit_code ? std::optional<std::int64_t>(*st.exit_code) : std::nullopt)
        .str_or_null("signal", st.signal)
        .str_or_null("endReason", st.end_reason)
        .str_or_null("finishedAt", st.finished_at);
  }
  if (!st.ready_when.empty())
    w.str("readyWhen", st.ready_when).boolean("ready", st.ready).str_or_null("readyAt", st.ready_at);
}

/// `logTail` of `st` (only bg_id and log_file are used), when asked for.
void append_tail(const Filesystem& fs, const sup::CommandStatus& st, std::optional<std::int64_t> tail_bytes,
                 std::string& out) {
  if (tail_bytes)
    JsonObjectWriter(out, JsonObjectWriter::More{}).str("logTail", fs.log_tail(st, static_cast<std::size_t>(*tail_bytes)));
}

/// The report's top-level fields, in their order (`fields=` picks among them).
constexpr std::string_view kReportFields[] = {"supervisor", "procs",  "finished", "hint",         "steps",
                                              "load",       "memory", "disk",     "workDirSizes", "notMeasured"};

std::string supervisor_status(Filesystem& fs, const Node& node, const Requester& reader) {
  const sup::SupervisorInfo info = fs.sup().info();
  // status.json,fields=steps+disk: only those fields, plus supervisor; names
  // that are none of them come back in unknownFields.
  const std::vector<std::string> fields = node.keys().items("fields");
  std::vector<std::string> unknown;
  for (const std::string& f : fields)
    if (std::find(std::begin(kReportFields), std::end(kReportFields), f) == std::end(kReportFields) &&
        std::find(unknown.begin(), unknown.end(), f) == unknown.end())
      unknown.push_back(f);
  const auto wants = [&](std::string_view f) {
    return fields.empty() || f == "supervisor" || std::find(fields.begin(), fields.end(), f) != fields.end();
  };
  const bool all = node.keys().has("all");
  const std::optional<std::int64_t> tail_bytes = node.keys().number("tailBytes");
  // Ended records are counted, not copied (thousands of them made this read
  // slow; bench/RESULTS.md); with `all` they are listed from EndedLines.
  // With allow_other a user sees their own.
  const std::optional<uid_t> owner = fs.sees_all(reader) ? std::nullopt : std::optional<uid_t>(reader.uid);
  std::size_t finished = 0;
  // The list is also where the working directories to measure come from.
  const bool list = wants("procs") || wants("workDirSizes") || wants("notMeasured");
  const std::vector<sup::CommandStatus> running =
      list || wants("finished") ? fs.sup().list_running(&finished, owner) : std::vector<sup::CommandStatus>{};
  const std::vector<sup::EndedEntry> ended =
      all && list ? fs.sup().ended_entries(owner) : std::vector<sup::EndedEntry>{};
  // Oldest first: named commands do not sort by bgId. Pointers are sorted,
  // not the records (moving a thousand of them showed in the profile).
  struct Item {
    const std::string* started_at;
    const sup::CommandStatus* running;  // or
    const sup::EndedEntry* ended;
  };
  std::vector<Item> order;
  order.reserve(running.size() + ended.size());
  // A command that ended between the two lists is in both: its end is the news.
  std::unordered_set<std::string_view> ended_ids;
  for (const sup::EndedEntry& e : ended) ended_ids.insert(e.bg_id);
  for (const sup::CommandStatus& st : running)
    if (!ended_ids.contains(st.bg_id)) order.push_back({&st.started_at, &st, nullptr});
  for (const sup::EndedEntry& e : ended) order.push_back({&e.started_at, nullptr, &e});
  // Queued commands have not started: after the others, in the queue's order.
  std::stable_sort(order.begin(), order.end(), [](const Item& a, const Item& b) {
    const bool qa = a.running && a.running->queued, qb = b.running && b.running->queued;
    if (qa != qb) return qb;
    if (qa) return a.running->queue_seq < b.running->queue_seq;
    return *a.started_at < *b.started_at;
  });
  // The list is spliced into the dump below in place of kProcsMark, one
  // entry a line, indented as the dump indents.
  std::string procs = "[";
  procs.reserve(order.size() * (tail_bytes ? 512 + static_cast<std::size_t>(*tail_bytes) : 512));
  const auto mine = [&](const sup::CommandStatus& owner_of) { return fs.mine(owner_of, reader); };
  const auto tail = [&](const sup::CommandStatus& owner_of, std::string& out) { append_tail(fs, owner_of, tail_bytes, out); };
  const auto render = [&](const sup::CommandStatus& st, std::string& head, std::string& rest) {
    summary_pieces(fs, st, head, rest);
  };
  std::vector<std::string> work_dirs;
  std::unordered_map<std::string, std::string> work_dir_of;  // a working directory's (first) record
  std::string head, rest;
  for (const Item& item : order) {
    const std::size_t mark = procs.size();
    procs += mark == 1 ? "\n    " : ",\n    ";
    if (item.ended) {
      if (!fs.ended_lines().append(procs, fs.sup(), *item.ended, render, mine, tail)) procs.resize(mark);
      continue;
    }
    const sup::CommandStatus& st = *item.running;
    head.clear();
    rest.clear();
    summary_pieces(fs, st, head, rest);
    procs += head;
    procs += mine(st) ? "true" : "false";
    procs += rest;
    tail(st, procs);
    procs += '}';
    if (work_dirs.size() < kMaxWorkDirs && !st.work_dir.empty() &&
        std::find(work_dirs.begin(), work_dirs.end(), st.work_dir) == work_dirs.end()) {
      work_dirs.push_back(st.work_dir);
      work_dir_of.emplace(st.work_dir, st.bg_id);
    }
  }
  if (all && list && !owner) fs.ended_lines().keep_only(ended);
  nlohmann::json measured = nlohmann::json::array();
  nlohmann::json not_measured = nlohmann::json::array();
  if (wants("workDirSizes") || wants("notMeasured")) {
    fs.work_dir_sizes().report(work_dirs, measured, not_measured);
    // A working directory's path and the names in it are its record's
    // strings: masked with its secrets, as its cwd is.
    for (nlohmann::json* list : {&measured, &not_measured})
      for (nlohmann::json& item : *list) {
        const auto path = item.find("path");
        const auto of = path != item.end() && path->is_string() ? work_dir_of.find(path->get<std::string>())
                                                                 : work_dir_of.end();
        fs.mask_json(item, of == work_dir_of.end() ? std::string() : of->second);
      }
  }
  procs += procs.size() == 1 ? "]" : "\n  ]";
  nlohmann::json j = {
      {"supervisor",
       {{"version", SBX_VERSION},
        {"pid", info.pid},
        {"startedAt", info.started_at},
        {"mountpoint", fs.config().mountpoint},
        {"stateDir", info.state_dir},
        {"tracking", info.tracking},
        {"cgroup", info.cgroup},
        {"paramNodes", fs.param_nodes().size()}}},
      {"procs", kProcsMark},
      {"finished", finished},
      {"hint", all ? kHintAll : kHint},
      {"steps", wants("steps") ? fs.box_steps().latest() : nlohmann::json()},
      {"load", wants("load") ? sup::load_json() : nlohmann::json()},
      {"memory", wants("memory") ? sup::memory_json() : nlohmann::json()},
      {"disk", wants("disk") ? sup::disk_json(info.state_dir, fs.own_mount()) : nlohmann::json()},
      {"workDirSizes", std::move(measured)},
      {"notMeasured", std::move(not_measured)},
  };
  if (!fields.empty()) {
    nlohmann::json picked = nlohmann::json::object();
    for (std::string_view f : kReportFields)
      if (wants(f)) picked[std::string(f)] = std::move(j[std::string(f)]);
    if (!unknown.empty()) picked["unknownFields"] = unknown;
    j = std::move(picked);
  }
  const std::string text = dump_json(j);
  // With its key: the quotes around it are the dump's own, never in a string.
  const std::string key = "\"procs\": ";
  const std::string mark = key + nlohmann::json(kProcsMark).dump();
  const std::size_t at = text.find(mark);
  if (at == std::string::npos) return text;
  // The report around the list, in the list's buffer: one buffer of
  // megabytes (status.json,all) is written once, not copied into another.
  procs.insert(0, std::string_view(text).substr(0, at + key.size()));
  procs.append(std::string_view(text).substr(at + mark.size()));
  return procs;
}

}  // namespace

std::unique_ptr<Handle> open_status(Filesystem& fs, const Node& node, const OpenRequest& req) {
  const Requester& reader = req.who;
  if (node.kind == Kind::status) return std::make_unique<SnapshotHandle>(supervisor_status(fs, node, reader));
  // The node's record was looked up without a CPU sample; this file shows one.
  const std::optional<sup::CommandStatus> st = fs.sup().status(node.id(), sup::CpuFigure::sample);
  const sup::CommandStatus& record = st ? *st : *node.record;
  nlohmann::json j = fs.record_json(record, reader);
  if (const std::optional<std::int64_t> n = node.keys().number("tailBytes"))
    j["logTail"] = fs.log_tail(record, static_cast<std::size_t>(*n));
  return std::make_unique<SnapshotHandle>(dump_json(j));
}

}  // namespace fsd
