// The shape of the tree: which names a directory holds, their inodes and
// attributes, read from the table of the tree's files (tree_file.cpp).
// Scratch files come after the tree's own names, in the root and in
// procs/ID/ (scratch_file.cpp); records in the order they were made.
#include <cerrno>
#include <ctime>
#include <algorithm>
#include <iterator>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

#include "fsd/dispatcher.hpp"
#include "fsd/files.hpp"
#include "supervisor/clock.hpp"

namespace fsd {

namespace {

constexpr std::string_view kLogSuffix = ".log";
constexpr blksize_t kLogBlockSize = kMaxRead;  // st_blksize of the log views: reads of the largest size

const timespec& mount_time() {
  static const timespec t = [] {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return now;
  }();
  return t;
}

sup::Error no_such_file() { return sup::Error{sup::Errc::not_found, "no such file"}; }

/// A record's start time as a timespec; nullopt when it has none (an empty
/// slot) or it does not parse.
std::optional<timespec> start_time(const std::string& iso) {
  const std::optional<std::int64_t> ms = sup::iso_to_ms(iso);
  if (!ms) return std::nullopt;
  return timespec{static_cast<time_t>(*ms / 1000), static_cast<long>(*ms % 1000) * 1000000};
}

// A listing's readdir offsets are places of the entries' own, not their
// indexes: a program reads a big folder in several getdents calls, and the
// kernel matches the offset it holds against a listing made later (its
// copy of procs/ filled anew, a page of it dropped). With indexes, a record
// made or removed in between shifted the rest: a name came twice or one
// that was there throughout was skipped. With places, the next part starts
// after the last entry returned, whatever came or went. The fixed entries
// take 1, 2, ...; a record its serial above kRecordPlaces (serials never
// change while the daemon runs, and come in the order records were made);
// a scratch file its inode's counter above kScratchPlaces.
constexpr off_t kRecordPlaces = 3;
constexpr off_t kScratchPlaces = off_t{1} << 16;

void number_fixed(std::vector<DirEntry>& out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i].off = static_cast<off_t>(i + 1);
}

void append_scratch(std::vector<DirEntry>& out, Filesystem& fs, const Node& dir, const Requester& who) {
  number_fixed(out);
  std::vector<DirEntry> scratch = list_scratch(fs, dir, who);
  for (DirEntry& e : scratch) e.off = kScratchPlaces + static_cast<off_t>(e.ino & ~kScratchInoBit);
  std::sort(scratch.begin(), scratch.end(), [](const DirEntry& a, const DirEntry& b) { return a.off < b.off; });
  out.insert(out.end(), std::make_move_iterator(scratch.begin()), std::make_move_iterator(scratch.end()));
}

}  // namespace

off_t record_place(std::uint64_t serial) { return kRecordPlaces + static_cast<off_t>(serial); }

namespace {

/// The records' entries, in the order they were made, after . and ..
void append_records(std::vector<DirEntry>& out, std::vector<DirEntry> records) {
  number_fixed(out);
  // Already so when every id is automatic (they sort in start order).
  const auto by_place = [](const DirEntry& a, const DirEntry& b) { return a.off < b.off; };
  if (!std::is_sorted(records.begin(), records.end(), by_place)) std::sort(records.begin(), records.end(), by_place);
  out.insert(out.end(), std::make_move_iterator(records.begin()), std::make_move_iterator(records.end()));
}

/// The node of `name`, FILE,KEYS with FILE the file `row` of `parent`: a
/// ParamNodes inode, one more lookup counted; EINVAL with a line in
/// `errors` when a key is wrong. `seen_in`: the directory whose entry the
/// kernel keeps for it, when not `parent` (logs/ID.log,KEYS is
/// procs/ID/log,KEYS).
sup::Result<Node> param_node(Filesystem& fs, const Node& parent, const TreeFile& row, std::string_view name,
                             std::optional<std::pair<fuse_ino_t, std::string_view>> seen_in = std::nullopt) {
  const auto [file, keys] = *split_param_name(name);
  const ParamFile param_row{row.place == Place::root ? ParamDir::root : ParamDir::record, row.name, row.keys};
  sup::Result<FileParams> params =
      parse_file_params(file, row.keys.empty() ? nullptr : &param_row, keys, fs.config().param_limits());
  if (params && row.check_keys)
    if (sup::Status st = row.check_keys(*params); !st) params = st.error();
  if (!params) {
    const std::string id = parent.record ? parent.id() : "";
    fs.errors().add(id.empty() ? std::string(name) : "procs/" + id + "/" + std::string(name), EINVAL,
                    params.error().message, name, id);
    return params.error();
  }
  Node node = parent.record ? fs.node_of(*parent.record, row.kind) : Node{row.kind, fixed_ino(row.kind), std::nullopt};
  node.ino = fs.param_nodes().acquire(parent.record ? parent.record->serial : 0, row.kind, *params);
  node.params = std::make_shared<const FileParams>(std::move(params.value()));
  // The kernel would keep this name (and its inode, and our entry) until
  // memory runs short: have it dropped soon.
  if (seen_in) fs.invalidator().schedule(seen_in->first, std::string(seen_in->second));
  else fs.invalidator().schedule(parent.ino, std::string(name));
  return node;
}

/// Where the fixed names in directory `dir` are; nullopt for a directory
/// whose names are not fixed (procs/, logs/).
std::optional<Place> place_in(Kind dir) {
  if (dir == Kind::root) return Place::root;
  if (dir == Kind::record_dir) return Place::record;
  return std::nullopt;
}

/// A name with parameters, `FILE,KEYS`, where FILE is a file of `parent`:
/// its node or EINVAL (param_node). nullopt when `name` is not of that form
/// (then it is no file of the tree, or a plain one).
std::optional<sup::Result<Node>> lookup_with_params(Filesystem& fs, const Node& parent, std::string_view name) {
  const auto split = split_param_name(name);
  if (!split) return std::nullopt;
  const std::optional<Place> place = place_in(parent.kind);
  if (!place) return std::nullopt;
  if (const TreeFile* row = tree_file(*place, split->first)) return param_node(fs, parent, *row, name);
  return std::nullopt;
}

}  // namespace

double timeout_of(const Node& node) { return node.params ? 0.0 : tree_file(node.kind).entry_timeout; }

double attr_timeout_of(Filesystem& fs, const Node& node) {
  if (node.params) return 0.0;
  return fs.ended_output().allow(node) ? EndedOutputCache::kAttrTimeout : tree_file(node.kind).attr_timeout;
}

sup::Result<Node> lookup(Filesystem& fs, const Node& parent, std::string_view name, const Requester& who) {
  if (std::optional<sup::Result<Node>> with_params = lookup_with_params(fs, parent, name)) return *with_params;
  switch (parent.kind) {
    case Kind::root:
      if (const TreeFile* f = tree_file(Place::root, name)) return Node{f->kind, fixed_ino(f->kind), std::nullopt};
      return lookup_scratch(fs, parent, name, who);
    case Kind::procs: {
      std::optional<sup::CommandStatus> st = fs.find(std::string(name), who);
      if (!st) return no_such_file();
      return fs.node_of(*st, Kind::record_dir);
    }
    case Kind::record_dir:
      if (const TreeFile* f = tree_file(Place::record, name)) return fs.node_of(*parent.record, f->kind);
      return lookup_scratch(fs, parent, name, who);
    case Kind::logs: {
      if (const auto split = split_param_name(name)) {  // ID.log,KEYS: the keys of procs/ID/log
        std::string_view base = split->first;
        if (base.size() <= kLogSuffix.size() || !base.ends_with(kLogSuffix)) return no_such_file();
        base.remove_suffix(kLogSuffix.size());
        std::optional<sup::CommandStatus> st = fs.find(std::string(base), who);
        if (!st || st->state == "empty") return no_such_file();
        const TreeFile* log = tree_file(Place::record, "log");
        return param_node(fs, fs.node_of(*st, Kind::record_dir), *log, "log," + std::string(split->second),
                          std::pair{parent.ino, name});
      }
      if (name.size() <= kLogSuffix.size() || !name.ends_with(kLogSuffix)) return no_such_file();
      name.remove_suffix(kLogSuffix.size());
      std::optional<sup::CommandStatus> st = fs.find(std::string(name), who);
      if (!st || st->state == "empty") return no_such_file();
      return fs.node_of(*st, Kind::logs_entry);
    }
    default:
      return sup::Error{sup::Errc::not_a_directory, "not a directory"};
  }
}

struct stat attr_of(Filesystem& fs, const Node& node, Handle* open) {
  if (node.kind == Kind::scratch) return scratch_attr(fs, node);
  const TreeFile& row = tree_file(node.kind);
  struct stat st {};
  st.st_ino = node.ino;
  st.st_mode = row.mode;
  // A folder's links: 2 and one per folder in it. procs/ holds as many as
  // there are records, counted nowhere cheaply: 1 says "not counted", as
  // find(1) and fts(3) read it (never "no subfolders, skip it").
  st.st_nlink = node.kind == Kind::root ? 4 : node.kind == Kind::procs ? 1 : S_ISDIR(st.st_mode) ? 2 : 1;
  st.st_uid = ::getuid();
  st.st_gid = ::getgid();
  if (node.record && fs.config().allow_other) st.st_uid = node.record->owner_uid;
  st.st_atim = st.st_mtim = st.st_ctim = mount_time();
  if (node.kind == Kind::procs || node.kind == Kind::logs)
    if (const std::int64_t ns = fs.records_changed_ns()) {
      st.st_mtim = st.st_ctim = timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    }
  // `ls -lt procs` sorts by recency: a record's folder dates from its start.
  if (node.kind == Kind::record_dir)
    if (const std::optional<timespec> t = start_time(node.record->started_at)) st.st_mtim = st.st_ctim = *t;
  st.st_blksize = 4096;
  if (row.size == Size::readme) st.st_size = static_cast<off_t>(fs.readme().size());
  if (row.size == Size::stream) st.st_blksize = kLogBlockSize;  // big reads, as for the logs
  if (row.size == Size::backing) {
    // Each read is a round trip to the daemon: invite the biggest ones (cat,
    // cp and friends size their buffer by st_blksize).
    st.st_blksize = kLogBlockSize;
    // The real size, so `tail -f` and friends see the file grow.
    struct stat backing {};
    const std::string path = log_path(node);
    if ((open && open->fstat(&backing)) || stream_attr(fs, node, &backing) ||
        (!path.empty() && ::stat(path.c_str(), &backing) == 0)) {
      st.st_size = backing.st_size;
      st.st_blocks = backing.st_blocks;
      st.st_mtim = st.st_ctim = backing.st_mtim;
    }
  }
  // Blocks for what it holds: `du` counts it, and a copier that takes few
  // blocks for holes has none to look for.
  if (st.st_blocks == 0) st.st_blocks = (st.st_size + 511) / 512;
  return st;
}

sup::Result<std::vector<DirEntry>> list_dir(Filesystem& fs, const Node& dir, const Requester& who,
                                            std::uint64_t* generation) {
  std::vector<DirEntry> out;
  const mode_t dmode = mode_of(Kind::root);
  switch (dir.kind) {
    case Kind::root:
      out.push_back({".", dir.ino, dmode});
      out.push_back({"..", dir.ino, dmode});
      for (const TreeFile& f : tree_files())
        if (f.place == Place::root) out.push_back({std::string(f.name), fixed_ino(f.kind), f.mode});
      append_scratch(out, fs, dir, who);
      return out;
    case Kind::procs: {
      out.push_back({".", dir.ino, dmode});
      out.push_back({"..", fixed_ino(Kind::root), dmode});
      append_records(out, list_procs(fs, who, generation));
      return out;
    }
    case Kind::record_dir:
      out.push_back({".", dir.ino, dmode});
      out.push_back({"..", fixed_ino(Kind::procs), dmode});
      for (const TreeFile& f : tree_files())
        if (f.place == Place::record) out.push_back({std::string(f.name), record_ino(dir.record->serial, f.kind), f.mode});
      append_scratch(out, fs, dir, who);
      return out;
    case Kind::logs: {
      out.push_back({".", dir.ino, dmode});
      out.push_back({"..", fixed_ino(Kind::root), dmode});
      std::vector<DirEntry> logs;
      for (const sup::RecordEntry& e : fs.sup().entries(generation)) {
        if (!fs.visible(e.owner_uid, who) || e.empty) continue;
        logs.push_back({e.bg_id + std::string(kLogSuffix), record_ino(e.serial, Kind::logs_entry),
                        mode_of(Kind::logs_entry), record_place(e.serial)});
      }
      append_records(out, std::move(logs));
      return out;
    }
    default:
      return sup::Error{sup::Errc::not_a_directory, "not a directory"};
  }
}

}  // namespace fsd
