#include "fsd/options.hpp"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse_opt.h>

#include "fsd/dispatcher.hpp"

namespace fsd {

namespace {

constexpr const char* kDefaultMountpoint = "/work/.sbx";

/// What fuse_opt_parse fills in (plain C members: it writes through offsets).
/// Numbers are taken as text and checked by number_of(): fuse_opt's
/// sscanf would take "-5" for a huge unsigned and "5abc" for 5.
struct RawOptions {
  char* state_dir = nullptr;
  char* secrets_file = nullptr;
  char* mountpoint = nullptr;
  char* source = nullptr;  // the first of two non-option arguments (mount(8)'s "none")
  char* cgroup = nullptr;
  char* wait_timeout = nullptr;
  char* max_request = nullptr;
  char* output_max = nullptr;
  char* keep_ended = nullptr;
  char* keep_ended_sec = nullptr;
  char* max_running = nullptr;
  char* max_running_per_user = nullptr;  // none: a quarter of max_running under allow_other
  char* keep_steps_sec = nullptr;
  char* log_max = nullptr;
  char* start_timeout = nullptr;
  char* scratch_ttl_ms = nullptr;
  char* daemon_log_max = nullptr;
  int allow_other = 0;
  int extra_args = 0;  // a third non-option argument
};

constexpr std::uint64_t kHundredYears = 100ull * 366 * 24 * 3600;

/// The option `name` given as `text` (null: not given, `fallback`): decimal
/// digits only, within [min, max].
sup::Result<std::uint64_t> number_of(const char* name, const char* text, std::uint64_t fallback, std::uint64_t min,
                                     std::uint64_t max) {
  if (!text) return fallback;
  const std::string_view t(text);
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  const bool digits = !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || ec != std::errc() || end != t.data() + t.size() || v < min || v > max)
    return sup::Error{sup::Errc::invalid_argument, std::string(name) + "=" + std::string(t) +
                                                       ": not a whole number from " + std::to_string(min) + " to " +
                                                       std::to_string(max) + " (decimal digits only)"};
  return v;
}

enum Key { kForeground, kDebug, kAllowOther };

#define SBX_OPT(t, m) {t, offsetof(RawOptions, m), 0}
const fuse_opt kSpec[] = {
    SBX_OPT("--state-dir %s", state_dir),
    SBX_OPT("--state-dir=%s", state_dir),
    SBX_OPT("--secrets-file %s", secrets_file),
    SBX_OPT("--secrets-file=%s", secrets_file),
    // The same as -o options, for mount(8) and /etc/fstab (mount.fuse3
    // passes every option of the fstab line as -o).
    SBX_OPT("state_dir=%s", state_dir),
    SBX_OPT("secrets_file=%s", secrets_file),
    SBX_OPT("wait_timeout=%s", wait_timeout),
    SBX_OPT("max_request=%s", max_request),
    SBX_OPT("output_max=%s", output_max),
    SBX_OPT("keep_ended=%s", keep_ended),
    SBX_OPT("keep_ended_sec=%s", keep_ended_sec),
    SBX_OPT("max_running=%s", max_running),
    SBX_OPT("max_running_per_user=%s", max_running_per_user),
    SBX_OPT("keep_steps_sec=%s", keep_steps_sec),
    SBX_OPT("log_max=%s", log_max),
    SBX_OPT("start_timeout=%s", start_timeout),
    SBX_OPT("cgroup=%s", cgroup),
    SBX_OPT("scratch_ttl_ms=%s", scratch_ttl_ms),  // not in --help: for tests
    SBX_OPT("daemon_log_max=%s", daemon_log_max),  // not in --help: for tests
    FUSE_OPT_KEY("--foreground", kForeground),
    FUSE_OPT_KEY("--debug", kDebug),
    FUSE_OPT_KEY("allow_other", kAllowOther),
    FUSE_OPT_END,
};
#undef SBX_OPT

int on_option(void* data, const char* arg, int key, fuse_args* out) {
  auto* raw = static_cast<RawOptions*>(data);
  switch (key) {
    case kForeground: return fuse_opt_add_arg(out, "-f") == 0 ? 0 : -1;  // spelled for libfuse
    case kDebug: return fuse_opt_add_arg(out, "-d") == 0 ? 0 : -1;
    case kAllowOther: raw->allow_other = 1; return 1;  // and keep it for the mount
    case FUSE_OPT_KEY_NONOPT:
      // Ours, not fuse_parse_cmdline's: it realpath()s the mount point, which
      // fails on a stale mount that we are about to clean up.
      // `sbxfs SOURCE MOUNTPOINT` is how mount.fuse3 calls us (mount -t
      // fuse.sbxfs SOURCE DIR, fstab): the source names nothing and is ignored.
      if (raw->source) {
        raw->extra_args = 1;
        return -1;
      }
      if (raw->mountpoint) {
        raw->source = raw->mountpoint;
        raw->mountpoint = nullptr;
      }
      raw->mountpoint = strdup(arg);
      return 0;
    default: return 1;
  }
}

std::string default_state_dir() {
  if (::geteuid() == 0) return "/var/lib/sbxfs";
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x == '/') return std::string(x) + "/sbxfs";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/state/sbxfs";
}

}  // namespace

sup::Result<Options> parse_options(int argc, char** argv) {
  Options o;
  RawOptions raw;
  fuse_args args = FUSE_ARGS_INIT(argc, argv);
  auto free_raw = [&] {
    for (char* text : {raw.state_dir, raw.secrets_file, raw.mountpoint, raw.source, raw.cgroup, raw.wait_timeout,
                       raw.max_request, raw.output_max, raw.keep_ended, raw.keep_ended_sec, raw.max_running,
                       raw.max_running_per_user, raw.keep_steps_sec, raw.log_max, raw.start_timeout,
                       raw.scratch_ttl_ms, raw.daemon_log_max})
      std::free(text);
    raw = RawOptions{};
  };
  auto fail = [&](std::string msg) -> sup::Result<Options> {
    free_raw();
    fuse_opt_free_args(&args);
    return sup::Error{sup::Errc::invalid_argument, std::move(msg)};
  };
  if (fuse_opt_parse(&args, &raw, kSpec, on_option) != 0)
    return fail(raw.extra_args ? "too many arguments: at most SOURCE and MOUNTPOINT" : "bad options (see --help)");
  // fstype fuse.sbxfs, fsname sbxfs, whatever argv[0] is called.
  // max_read last, so that it is the one taken: init() says the same (dispatcher.hpp).
  const std::string fixed = "-ofsname=sbxfs,subtype=sbxfs,max_read=" + std::to_string(kMaxRead);
  if (fuse_opt_add_arg(&args, fixed.c_str()) != 0) return fail("out of memory");

  fuse_cmdline_opts cl{};
  if (fuse_parse_cmdline(&args, &cl) != 0) return fail("bad options (see --help)");
  std::free(cl.mountpoint);  // none: we took the non-option argument ourselves

  o.mountpoint = raw.mountpoint ? raw.mountpoint : kDefaultMountpoint;
  if (raw.state_dir && !*raw.state_dir) return fail("the state directory is empty: give a path (--state-dir DIR)");
  o.state_dir = raw.state_dir ? raw.state_dir : default_state_dir();
  o.secrets_file = raw.secrets_file ? raw.secrets_file : "";
  constexpr std::uint64_t kUnsigned = std::numeric_limits<unsigned>::max();
  constexpr std::uint64_t kSize = std::numeric_limits<std::size_t>::max();
  struct Number {
    const char* name;
    const char* text;
    std::uint64_t fallback, min, max;
    std::uint64_t* out;
  };
  std::uint64_t wait_timeout, max_request, output_max, keep_ended, keep_ended_sec, max_running, per_user = 0,
      keep_steps_sec, log_max, start_timeout, scratch_ttl_ms, daemon_log_max;
  const Number numbers[] = {
      {"wait_timeout", raw.wait_timeout, 600, 1, kHundredYears, &wait_timeout},
      {"max_request", raw.max_request, 4ull << 20, 1, kSize, &max_request},
      {"output_max", raw.output_max, 1ull << 20, 1, kSize, &output_max},
      {"keep_ended", raw.keep_ended, 10000, 0, kSize, &keep_ended},
      {"keep_ended_sec", raw.keep_ended_sec, 604800, 0, kHundredYears, &keep_ended_sec},
      {"max_running", raw.max_running, 2000, 0, kSize, &max_running},
      {"max_running_per_user", raw.max_running_per_user, 0, 0, kSize, &per_user},
      {"keep_steps_sec", raw.keep_steps_sec, 604800, 0, kHundredYears, &keep_steps_sec},
      {"log_max", raw.log_max, sup::kDefaultLogMax, 0, std::numeric_limits<std::uint64_t>::max(), &log_max},
      {"start_timeout", raw.start_timeout, 60, 1, std::min(kUnsigned, kHundredYears), &start_timeout},
      {"scratch_ttl_ms", raw.scratch_ttl_ms, 60000, 0, kHundredYears * 1000, &scratch_ttl_ms},
      {"daemon_log_max", raw.daemon_log_max, 64 << 20, 4096, std::numeric_limits<std::uint64_t>::max(), &daemon_log_max},
  };
  for (const Number& n : numbers) {
    const sup::Result<std::uint64_t> v = number_of(n.name, n.text, n.fallback, n.min, n.max);
    if (!v) return fail(v.error().message);
    *n.out = *v;
  }
  o.wait_timeout_sec = static_cast<unsigned>(wait_timeout);
  o.max_request = max_request;
  o.output_max = output_max;
  o.keep_ended = keep_ended;
  o.keep_ended_sec = keep_ended_sec;
  o.max_running = max_running;
  // Default: under allow_other no user may take more than a quarter of the
  // slots, so others can still start; alone on the box, no limit.
  if (raw.max_running_per_user)
    o.max_running_per_user = per_user;
  else if (raw.allow_other && max_running > 0)
    o.max_running_per_user = std::max<std::size_t>(1, max_running / 4);
  o.keep_steps_sec = keep_steps_sec;
  o.log_max = log_max;
  o.start_timeout_sec = static_cast<unsigned>(start_timeout);
  o.allow_other = raw.allow_other;
  o.scratch_ttl_ms = scratch_ttl_ms;
  o.daemon_log_max = daemon_log_max;
  o.cgroup = raw.cgroup ? raw.cgroup : "";
  free_raw();  // copied: fail() must not free them again
  o.foreground = cl.foreground;
  o.debug = cl.debug;
  o.show_help = cl.show_help;
  o.show_version = cl.show_version;
  o.max_threads = cl.max_threads;
  o.max_idle_threads = cl.max_idle_threads;
  o.clone_fd = cl.clone_fd;
  o.fuse = args;
  return o;
}

std::string usage(const char* prog) {
  return std::string("usage: ") + prog + " [options] [[SOURCE] MOUNTPOINT]\n" +
         "\n"
         "Process supervision as a filesystem. MOUNTPOINT defaults to " + kDefaultMountpoint + ".\n"
         "SOURCE (mount(8) and /etc/fstab pass one, e.g. none) is ignored.\n"
         "\n"
         "sbxfs options:\n"
         "    -f   --foreground      stay in the foreground (default: return once mounted)\n"
         "    -d   --debug           foreground, with FUSE debug output\n"
         "    --state-dir DIR        records and logs (default: /var/lib/sbxfs as root,\n"
         "                           else $XDG_STATE_HOME/sbxfs or ~/.local/state/sbxfs)\n"
         "    --secrets-file FILE    KEY=VALUE lines whose values are masked everywhere\n"
         "    -o state_dir=DIR, -o secrets_file=FILE\n"
         "                           the same, as mount options (mount -t fuse.sbxfs, fstab)\n"
         "    -o wait_timeout=SEC    cap of a blocking read of procs/ID/wait (default 600)\n"
         "    -o max_request=BYTES   largest request written to cmd (default 4194304)\n"
         "    -o output_max=BYTES    cap of each stream in procs/ID/output (default 1048576)\n"
         "    -o keep_ended=N        ended commands kept, the oldest removed first (default 10000;\n"
         "                           0: no count limit)\n"
         "    -o keep_ended_sec=SEC  remove ended commands this long after they ended\n"
         "                           (default 604800, a week; 0: no age limit)\n"
         "    -o max_running=N       commands running at once; more: EAGAIN (default 2000; 0: no limit)\n"
         "    -o max_running_per_user=N  commands one user may run at once; more: EAGAIN\n"
         "                           (default: max_running/4 with allow_other, else no limit; 0: no limit)\n"
         "    -o keep_steps_sec=SEC  keep the box's steps (steps.json) this long (default 604800; 0: forever)\n"
         "    -o log_max=BYTES       output kept per command: its first half and the latest\n"
         "                           output (default 2147483648; 0: no limit)\n"
         "    -o start_timeout=SEC   a start whose monitor does not report within SEC fails\n"
         "                           with ETIMEDOUT, nothing started (default 60)\n"
         "    -o allow_other         let every user in; each sees and runs only their own\n"
         "    -o cgroup=PATH|off     each command in a cgroup of its own below PATH (a cgroup v2\n"
         "                           directory; default: the daemon's own cgroup when writable);\n"
         "                           off: track process trees\n"
         "\n"
         "unmount: fusermount3 -u MOUNTPOINT (running commands keep running)\n"
         "\n";
}

sup::Result<std::vector<std::string>> load_secrets(const std::string& path) {
  // A folder reads as empty: nothing would be masked, and nothing said. (A
  // pipe is fine: `--secrets-file <(pass show box)`.)
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return sup::error_from_errno(errno, "cannot read secrets file " + path);
  if (S_ISDIR(st.st_mode)) return sup::Error{sup::Errc::invalid_argument, "cannot read secrets file " + path + ": a folder"};
  std::ifstream in(path);
  if (!in) return sup::error_from_errno(errno, "cannot read secrets file " + path);
  std::vector<std::string> values;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    const std::size_t eq = line.find('=', start);
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    if (!value.empty()) values.push_back(std::move(value));
  }
  return values;
}

}  // namespace fsd
