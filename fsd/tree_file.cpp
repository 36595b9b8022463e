#include "fsd/tree_file.hpp"

#include <array>
#include <vector>

#include "fsd/handle.hpp"

namespace fsd {

namespace {

constexpr mode_t kDir = S_IFDIR | 0755;
constexpr mode_t kReadOnly = S_IFREG | 0444;
constexpr mode_t kReadWrite = S_IFREG | 0666;
constexpr mode_t kWriteOnly = S_IFREG | 0222;

// Fixed files are cached 1 s. A command's names are not (they come and go),
// and neither are the logs' attributes (they grow), but the attributes of
// its other files are, 1 s: they never change (size 0, the mount's time)
// but for the owner of a slot run again by another user (allow_other), a
// look the daemon does not go by. Each `fstat` after an open (`cat`,
// Python's open) is then no GETATTR round trip. Those of procs/ID itself
// change only when a command starts in the slot (its mtime is the start
// time): cached 1 s, they spare `ls -l procs` a GETATTR per command after
// its LOOKUP. Scratch names go away with a rename: never cached.
constexpr TreeFile kFiles[] = {
    // The root, in listing order.
    {.kind = Kind::readme, .place = Place::root, .name = "README", .mode = kReadOnly, .open = open_readme,
     .size = Size::readme},
    {.kind = Kind::cmd, .place = Place::root, .name = "cmd", .mode = kReadWrite, .open = open_cmd},
    {.kind = Kind::status, .place = Place::root, .name = "status.json", .mode = kReadOnly, .open = open_status,
     .keys = param_keys::root_status, .reads_client = true},
    {.kind = Kind::errors, .place = Place::root, .name = "errors", .mode = kReadOnly, .open = open_errors},
    {.kind = Kind::procs, .place = Place::root, .name = "procs", .mode = kDir},
    {.kind = Kind::logs, .place = Place::root, .name = "logs", .mode = kDir},
    {.kind = Kind::box_steps, .place = Place::root, .name = "steps.json", .mode = kReadOnly, .open = open_box_steps},

    // procs/ID/, in listing order.
    {.kind = Kind::record_cmd, .place = Place::record, .name = "cmd", .mode = kReadWrite, .open = open_cmd,
     .entry_timeout = 0},
    {.kind = Kind::record_status, .place = Place::record, .name = "status.json", .mode = kReadOnly,
     .open = open_status, .keys = param_keys::record_status, .entry_timeout = 0,
     .reads_client = true},
    {.kind = Kind::log, .place = Place::record, .name = "log", .mode = kReadOnly, .open = open_log,
     .keys = param_keys::log, .entry_timeout = 0, .attr_timeout = 0, .size = Size::backing},
    {.kind = Kind::stdout_log, .place = Place::record, .name = "stdout", .mode = kReadOnly, .open = open_log,
     .keys = param_keys::log, .entry_timeout = 0, .attr_timeout = 0, .size = Size::backing},
    {.kind = Kind::stderr_log, .place = Place::record, .name = "stderr", .mode = kReadOnly, .open = open_log,
     .keys = param_keys::log, .entry_timeout = 0, .attr_timeout = 0, .size = Size::backing},
    {.kind = Kind::tail, .place = Place::record, .name = "tail", .mode = kReadOnly, .open = open_tail,
     .keys = param_keys::tail, .entry_timeout = 0},
    {.kind = Kind::wait, .place = Place::record, .name = "wait", .mode = kReadOnly, .open = open_wait,
     .keys = param_keys::wait, .entry_timeout = 0, .reads_client = true},
    {.kind = Kind::ready, .place = Place::record, .name = "ready", .mode = kReadWrite, .open = open_ready,
     .keys = param_keys::ready, .check_keys = check_ready_keys, .entry_timeout = 0, .reads_client = true},
    {.kind = Kind::output, .place = Place::record, .name = "output", .mode = kReadOnly, .open = open_output,
     .keys = param_keys::output, .entry_timeout = 0, .reads_client = true},
    {.kind = Kind::steps, .place = Place::record, .name = "steps", .mode = kWriteOnly, .open = open_steps,
     .entry_timeout = 0},
    {.kind = Kind::steps_json, .place = Place::record, .name = "steps.json", .mode = kReadOnly,
     .open = open_steps_json, .entry_timeout = 0},
    {.kind = Kind::stop, .place = Place::record, .name = "stop", .mode = kWriteOnly, .open = open_stop,
     .entry_timeout = 0},
    {.kind = Kind::signal, .place = Place::record, .name = "signal", .mode = kWriteOnly, .open = open_signal,
     .entry_timeout = 0},
    {.kind = Kind::events, .place = Place::record, .name = "events", .mode = kReadOnly, .open = open_events,
     .keys = param_keys::events, .check_keys = check_events_keys, .entry_timeout = 0, .size = Size::stream},
    {.kind = Kind::stdin_pipe, .place = Place::record, .name = "stdin", .mode = kWriteOnly, .open = open_stdin,
     .keys = param_keys::stdin_file, .entry_timeout = 0},

    // Named otherwise.
    {.kind = Kind::root, .place = Place::unnamed, .mode = kDir},
    {.kind = Kind::record_dir, .place = Place::procs, .mode = kDir, .entry_timeout = 0, .attr_timeout = 1},
    {.kind = Kind::logs_entry, .place = Place::logs, .mode = kReadOnly, .open = open_log, .entry_timeout = 0,
     .attr_timeout = 0, .size = Size::backing},
    {.kind = Kind::scratch, .place = Place::unnamed, .mode = S_IFREG | 0600, .open = open_scratch,
     .entry_timeout = 0, .attr_timeout = 0},
};

/// The rows by kind (the low kRecordKindBits bits of an inode).
const std::array<const TreeFile*, kKindSlots>& by_kind() {
  static const std::array<const TreeFile*, kKindSlots> rows = [] {
    std::array<const TreeFile*, kKindSlots> out{};
    for (const TreeFile& f : kFiles) out[static_cast<std::size_t>(f.kind)] = &f;
    return out;
  }();
  return rows;
}

}  // namespace

std::span<const TreeFile> tree_files() { return kFiles; }

const TreeFile& tree_file(Kind kind) { return *by_kind()[static_cast<std::size_t>(kind) & kRecordKindMask]; }

const TreeFile* tree_file(Place place, std::string_view name) {
  for (const TreeFile& f : kFiles)
    if (f.place == place && f.name == name) return &f;
  return nullptr;
}

std::span<const ParamFile> param_files() {
  static const std::vector<ParamFile> rows = [] {
    std::vector<ParamFile> out;
    for (const TreeFile& f : kFiles)
      if (!f.keys.empty()) out.push_back({f.place == Place::root ? ParamDir::root : ParamDir::record, f.name, f.keys});
    return out;
  }();
  return rows;
}

const ParamFile* find_param_file(ParamDir dir, std::string_view file) {
  for (const ParamFile& f : param_files())
    if (f.dir == dir && f.name == file) return &f;
  return nullptr;
}

}  // namespace fsd
