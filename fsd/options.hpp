#pragma once
// The daemon's command line, parsed with libfuse's own parser (fuse_opt_parse
// for sbxfs's options, then fuse_parse_cmdline for FUSE's):
//   sbxfs [options] [[SOURCE] MOUNTPOINT]      (SOURCE: mount.fuse3's, ignored)
//   -f/--foreground, -d/--debug, --state-dir DIR, --secrets-file FILE,
//   -o state_dir=DIR, -o secrets_file=FILE (the same, for mount(8) and fstab),
//   -o OPT[,OPT]: FUSE options, and wait_timeout=SEC, max_request=BYTES, output_max=BYTES,
//                 keep_ended=N, keep_ended_sec=SEC, max_running=N,
//                 log_max=BYTES, start_timeout=SEC, max_running_per_user=N, keep_steps_sec=SEC,
//                 cgroup=PATH|off
//   -h/--help, -V/--version
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <fuse_lowlevel.h>

#include "supervisor/error.hpp"
#include "supervisor/log_limit.hpp"

namespace fsd {

struct Options {
  std::string mountpoint;    ///< as given (may be missing or a stale mount); default /work/.sbx
  std::string state_dir;     ///< default: /var/lib/sbxfs (root), $XDG_STATE_HOME/sbxfs, ~/.local/state/sbxfs
  std::string secrets_file;  ///< empty: none
  unsigned wait_timeout_sec = 600;
  std::size_t max_request = std::size_t{4} << 20;
  std::size_t output_max = std::size_t{1} << 20;
  std::size_t keep_ended = 10000;         ///< ended records kept; 0: no count limit
  unsigned long keep_ended_sec = 604800;  ///< ended records kept this long; 0: no age limit
  std::size_t max_running = 2000;         ///< commands running at once; 0: no limit
  std::size_t max_running_per_user = 0;   ///< commands one uid may run at once; 0: no limit
  unsigned long keep_steps_sec = 604800;  ///< the box's steps are kept this long; 0: forever
  std::uint64_t log_max = sup::kDefaultLogMax;  ///< output bytes kept per command; 0: no limit
  unsigned start_timeout_sec = 60;        ///< a monitor's wait for each report of a start
  std::string cgroup;                     ///< -o cgroup=PATH|off; empty: find a writable cgroup v2
  bool allow_other = false;
  /// Hidden (for tests): an unrenamed scratch file lives this long after its last close.
  unsigned long scratch_ttl_ms = 60000;
  /// In the background, STATE/sbxfs.log past this size is renamed sbxfs.log.1 (replacing it) and begun anew.
  std::uint64_t daemon_log_max = 64 << 20;
  bool foreground = false;
  bool debug = false;
  bool show_help = false;
  bool show_version = false;
  unsigned max_threads = 10;
  unsigned max_idle_threads = static_cast<unsigned>(-1);
  bool clone_fd = false;
  /// What is left for fuse_session_new (FUSE -o options, -d). Owned: free
  /// with fuse_opt_free_args.
  fuse_args fuse = FUSE_ARGS_INIT(0, nullptr);
};

/// Parses argv. Errors are usage errors, their message ready to print.
sup::Result<Options> parse_options(int argc, char** argv);

/// The --help text (sbxfs's part; the caller adds libfuse's).
std::string usage(const char* prog);

/// The values of a --secrets-file: KEY=VALUE lines (blank lines and # comments skipped).
sup::Result<std::vector<std::string>> load_secrets(const std::string& path);

}  // namespace fsd
