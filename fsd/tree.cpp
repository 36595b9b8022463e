// The shape of the tree: which names a directory holds, their inodes, modes
// and attributes. Fixed files are cached 1 s; a command's files and logs 0 s
// (they come and go, and logs grow), except the attributes of procs/ID
// itself, which change only when a command starts in the slot (its mtime
// is the start time): cached 1 s, they spare `ls -l procs` a GETATTR per
// command after its LOOKUP. Scratch files come after the tree's own names,
// in the root and in procs/ID/ (scratch_file.cpp).
#include <cerrno>
#include <ctime>
#include <iterator>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

#include "fsd/files.hpp"
#include "supervisor/clock.hpp"

namespace fsd {

namespace {

struct FileSpec {
  Kind kind;
  const char* name;
};

constexpr FileSpec kRootFiles[] = {
    {Kind::readme, "README"}, {Kind::cmd, "cmd"},   {Kind::status, "status.json"},
    {Kind::errors, "errors"}, {Kind::procs, "procs"}, {Kind::logs, "logs"},
    {Kind::box_steps, "steps.json"},
};

constexpr FileSpec kRecordFiles[] = {
    {Kind::record_cmd, "cmd"}, {Kind::record_status, "status.json"},
    {Kind::log, "log"},        {Kind::stdout_log, "stdout"},
    {Kind::stderr_log, "stderr"}, {Kind::tail, "tail"},
    {Kind::wait, "wait"},      {Kind::ready, "ready"},
    {Kind::output, "output"},  {Kind::steps, "steps"},
    {Kind::steps_json, "steps.json"},
    {Kind::stop, "stop"},      {Kind::signal, "signal"},
    {Kind::events, "events"},
};

constexpr std::string_view kLogSuffix = ".log";
constexpr blksize_t kLogBlockSize = 512 * 1024;  // st_blksize of the log views

bool is_log(Kind k) {
  return k == Kind::log || k == Kind::stdout_log || k == Kind::stderr_log || k == Kind::logs_entry;
}

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

void append_scratch(std::vector<DirEntry>& out, Filesystem& fs, const Node& dir, const Requester& who) {
  std::vector<DirEntry> scratch = list_scratch(fs, dir, who);
  out.insert(out.end(), std::make_move_iterator(scratch.begin()), std::make_move_iterator(scratch.end()));
}

/// The kind of the tree's file `name` in `dir`; nullopt when `dir` has none such.
template <std::size_t N>
std::optional<Kind> kind_named(const FileSpec (&files)[N], std::string_view name) {
  for (const FileSpec& f : files)
    if (name == f.name) return f.kind;
  return std::nullopt;
}

/// The node of `name`, FILE,KEYS with FILE a file of `parent` of kind `kind`
/// (in `dir`): a ParamNodes inode, one more lookup counted; EINVAL with a
/// line in `errors` when a key is wrong.
sup::Result<Node> param_node(Filesystem& fs, const Node& parent, Kind kind, ParamDir dir, std::string_view name) {
  const auto [file, keys] = *split_param_name(name);
  sup::Result<FileParams> params = parse_file_params(file, find_param_file(dir, file), keys, fs.config().param_limits());
  if (!params) {
    const std::string id = parent.record ? parent.id() : "";
    fs.errors().add(id.empty() ? std::string(name) : "procs/" + id + "/" + std::string(name), EINVAL,
                    params.error().message, name, id);
    return params.error();
  }
  Node node = parent.record ? fs.node_of(*parent.record, kind) : Node{kind, fixed_ino(kind), std::nullopt};
  node.ino = fs.param_nodes().acquire(parent.record ? parent.record->serial : 0, kind, *params);
  node.params = std::make_shared<const FileParams>(std::move(params.value()));
  // The kernel would keep this name (and its inode, and our entry) until
  // memory runs short: have it dropped soon.
  fs.invalidator().schedule(parent.ino, std::string(name));
  return node;
}

/// A name with parameters, `FILE,KEYS`, where FILE is a file of `parent`:
/// its node or EINVAL (param_node). nullopt when `name` is not of that form
/// (then it is no file of the tree, or a plain one).
std::optional<sup::Result<Node>> lookup_with_params(Filesystem& fs, const Node& parent, std::string_view name) {
  const auto split = split_param_name(name);
  if (!split) return std::nullopt;
  if (parent.kind == Kind::root) {
    if (const std::optional<Kind> kind = kind_named(kRootFiles, split->first))
      return param_node(fs, parent, *kind, ParamDir::root, name);
  } else if (parent.kind == Kind::record_dir) {
    if (const std::optional<Kind> kind = kind_named(kRecordFiles, split->first))
      return param_node(fs, parent, *kind, ParamDir::record, name);
  }
  return std::nullopt;
}

}  // namespace

mode_t mode_of(Kind kind) {
  switch (kind) {
    case Kind::root:
    case Kind::procs:
    case Kind::logs:
    case Kind::record_dir: return S_IFDIR | 0755;
    case Kind::cmd:
    case Kind::record_cmd:
    case Kind::ready: return S_IFREG | 0666;
    case Kind::stop:
    case Kind::signal:
    case Kind::steps: return S_IFREG | 0222;
    case Kind::scratch: return S_IFREG | 0600;
    default: return S_IFREG | 0444;
  }
}

// Scratch names go away with a rename: never cached.
double timeout_of(Kind kind) { return is_record_kind(kind) || kind == Kind::scratch ? 0.0 : 1.0; }

double attr_timeout_of(Kind kind) { return kind == Kind::record_dir ? 1.0 : timeout_of(kind); }

double timeout_of(const Node& node) { return node.params ? 0.0 : timeout_of(node.kind); }

double attr_timeout_of(const Node& node) { return node.params ? 0.0 : attr_timeout_of(node.kind); }

sup::Result<Node> lookup(Filesystem& fs, const Node& parent, std::string_view name, const Requester& who) {
  if (std::optional<sup::Result<Node>> with_params = lookup_with_params(fs, parent, name)) return *with_params;
  switch (parent.kind) {
    case Kind::root:
      for (const FileSpec& f : kRootFiles)
        if (name == f.name) return Node{f.kind, fixed_ino(f.kind), std::nullopt};
      return lookup_scratch(fs, parent, name, who);
    case Kind::procs: {
      std::optional<sup::CommandStatus> st = fs.find(std::string(name), who);
      if (!st) return no_such_file();
      return fs.node_of(*st, Kind::record_dir);
    }
    case Kind::record_dir:
      for (const FileSpec& f : kRecordFiles)
        if (name == f.name) return fs.node_of(*parent.record, f.kind);
      return lookup_scratch(fs, parent, name, who);
    case Kind::logs: {
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
  struct stat st {};
  st.st_ino = node.ino;
  st.st_mode = mode_of(node.kind);
  st.st_nlink = S_ISDIR(st.st_mode) ? 2 : 1;
  st.st_uid = ::getuid();
  st.st_gid = ::getgid();
  if (node.record && fs.config().allow_other) st.st_uid = node.record->owner_uid;
  st.st_atim = st.st_mtim = st.st_ctim = mount_time();
  // `ls -lt procs` sorts by recency: a record's folder dates from its start.
  if (node.kind == Kind::record_dir)
    if (const std::optional<timespec> t = start_time(node.record->started_at)) st.st_mtim = st.st_ctim = *t;
  st.st_blksize = 4096;
  if (node.kind == Kind::readme) st.st_size = static_cast<off_t>(fs.readme().size());
  if (node.kind == Kind::events) st.st_blksize = kLogBlockSize;  // big reads, as for the logs
  if (is_log(node.kind)) {
    // Each read is a round trip to the daemon: invite big ones (cat, cp and
    // friends size their buffer by st_blksize). 512 KiB + libfuse's header
    // still fits an unprivileged splice pipe (pipe-max-size, 1 MiB).
    st.st_blksize = kLogBlockSize;
    // The real size, so `tail -f` and friends see the file grow.
    struct stat backing {};
    const std::string path = log_path(node);
    if ((open && open->fstat(&backing)) || stream_attr(node, &backing) ||
        (!path.empty() && ::stat(path.c_str(), &backing) == 0)) {
      st.st_size = backing.st_size;
      st.st_blocks = backing.st_blocks;
      st.st_mtim = st.st_ctim = backing.st_mtim;
    }
  }
  return st;
}

sup::Result<std::vector<DirEntry>> list_dir(Filesystem& fs, const Node& dir, const Requester& who) {
  std::vector<DirEntry> out;
  const mode_t dmode = mode_of(Kind::root);
  switch (dir.kind) {
    case Kind::root:
      out.push_back({".", dir.ino, dmode});
      out.push_back({"..", dir.ino, dmode});
      for (const FileSpec& f : kRootFiles) out.push_back({f.name, fixed_ino(f.kind), mode_of(f.kind)});
      append_scratch(out, fs, dir, who);
      return out;
    case Kind::procs: {
      out.push_back({".", dir.ino, dmode});
      out.push_back({"..", fixed_ino(Kind::root), dmode});
      std::vector<DirEntry> procs = list_procs(fs, who);
      out.insert(out.end(), procs.begin(), procs.end());
      return out;
    }
    case Kind::record_dir:
      out.push_back({".", dir.ino, dmode});
      out.push_back({"..", fixed_ino(Kind::procs), dmode});
      for (const FileSpec& f : kRecordFiles)
        out.push_back({f.name, record_ino(dir.record->serial, f.kind), mode_of(f.kind)});
      append_scratch(out, fs, dir, who);
      return out;
    case Kind::logs:
      out.push_back({".", dir.ino, dmode});
      out.push_back({"..", fixed_ino(Kind::root), dmode});
      for (const sup::RecordEntry& e : fs.sup().entries()) {
        if (!fs.visible(e.owner_uid, who) || e.empty) continue;
        out.push_back({e.bg_id + std::string(kLogSuffix), record_ino(e.serial, Kind::logs_entry),
                       mode_of(Kind::logs_entry)});
      }
      return out;
    default:
      return sup::Error{sup::Errc::not_a_directory, "not a directory"};
  }
}

}  // namespace fsd
