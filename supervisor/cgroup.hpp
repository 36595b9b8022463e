#pragma once
// The kernel's tracking of a command: one cgroup v2 per command, below a
// subtree of the daemon's own. Membership is exact (setsid, double forks
// and a cleared environment change nothing), `cgroup.kill` ends every
// member at once, `cgroup.events` says `populated 0` when the last one has
// gone (poll(2) POLLPRI / inotify IN_MODIFY on it: an event, not a poll),
// `cgroup.freeze` pauses them all, `cpu.stat` and `memory.events` count.
//
// libc and the C++ standard library only, no exceptions thrown: the daemon
// and the (static) monitor both link it. Errors are errno values (0: done),
// with words where a user will read them.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sup {

/// Where a supervisor makes its commands' cgroups.
struct CgroupHierarchy {
  std::string base;      ///< the writable cgroup found (own, delegated, or given)
  /// base/sbxfs-KEY: every command's cgroup is a child of it. Made with the
  /// first command's, with an empty child `live` that keeps it while the
  /// daemon runs; at the daemon's exit `live` goes, and the subtree with the
  /// last command's cgroup (a daemon killed leaves at most the empty
  /// subtree and `live`, which the next one on the state directory takes over).
  std::string subtree;
  std::vector<std::string> controllers;  ///< of memory, cpu, pids: those enabled for the commands
  bool has(const std::string& controller) const;
};

/// Finds and prepares the hierarchy. `mode`: "" finds one (the daemon's
/// own cgroup in the cgroup2 mount, when writable: a delegated one, or a
/// hybrid layout's /sys/fs/cgroup/unified), "off" none, else a cgroup v2
/// directory to use. `key` names this supervisor's subtree (stable across
/// restarts: commands are taken back through their recorded paths).
/// nullopt with `why` when there is none (then processes are tracked as a tree).
/// Where the base holds processes and its controllers cannot be enabled
/// below it (a delegated unit's cgroup), the calling process moves itself to
/// base/daemon first, as cgroup v2's no-internal-process rule requires, and
/// `companions` with it: processes of the daemon's own that share its
/// cgroup (the parent of a background start, which waits there for the
/// mount and would keep the controllers off).
std::optional<CgroupHierarchy> find_cgroup_hierarchy(const std::string& mode, const std::string& key,
                                                     std::string* why, const std::vector<pid_t>& companions = {});
/// Moves `pids` to base/daemon (made if need be); 0, or the errno of the
/// first (a later one that has exited meanwhile is no error).
int move_to_daemon_leaf(const std::string& base, const std::vector<pid_t>& pids);
/// Makes `live` again in a subtree that commands taken back at a restart
/// hold (the last daemon removed it at its exit): else the subtree would go
/// with the last of them, under this daemon, and a start make it anew.
void hold_cgroup_hierarchy(const CgroupHierarchy& h);
/// Removes `live`, and the subtree when nothing else is left in it (at shutdown).
void release_cgroup_hierarchy(const CgroupHierarchy& h);
/// A short stable name for `text` (the state directory): 16 hex digits.
std::string cgroup_key(const std::string& text);

/// One command's cgroup, by path. Copyable; holds no fd.
class Cgroup {
 public:
  Cgroup() = default;
  explicit Cgroup(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  bool empty() const { return path_.empty(); }

  /// mkdir; an empty leftover of that name is removed and made again.
  /// EBUSY when a populated one is in the way.
  int create() const;
  /// rmdir, child cgroups first; then the parent too when it is a
  /// supervisor's subtree (sbxfs-*) left empty. ENOENT counts as done.
  int remove() const;
  bool exists() const;

  /// cgroup.procs opened for writing: a child writes "0" to it between fork
  /// and exec to join (write(2) is async-signal-safe).
  int open_procs() const;
  /// The cgroup's directory (O_PATH), for clone3's CLONE_INTO_CGROUP.
  int open_dir() const;
  /// cgroup.events, for poll(2) POLLPRI (or inotify IN_MODIFY); read it
  /// (pread at 0) after each event, which re-arms it.
  int open_events() const;
  /// `populated 1` in cgroup.events; false when gone or unreadable.
  bool populated() const;
  /// Same, from an fd of open_events().
  static bool populated(int events_fd);
  /// Blocks up to `limit` for `populated 0` (an event on cgroup.events).
  bool wait_empty(std::chrono::milliseconds limit) const;
  /// Ends what is left and the cgroup: cgroup.kill, a wait (up to `limit`)
  /// for `populated 0`, remove(). 0, or an errno (EBUSY: still populated).
  /// Blocks: for a worker thread, or at load.
  int destroy(std::chrono::milliseconds limit = std::chrono::seconds(10)) const;

  /// The pids in cgroup.procs, and in those of the cgroups below.
  std::vector<pid_t> members() const;
  /// Sends `sig` (then SIGCONT when also_cont) to every member, each
  /// through a pidfd that is checked to still be a member (no reused pid
  /// is hit), and to the members forked meanwhile (the list is read again
  /// until it shows no one new, at most kSignalRounds times); each once.
  /// `own_child`, the caller's child not reaped yet, needs no check: its
  /// pid cannot be reused. Returns how many were signalled.
  std::size_t signal_members(int sig, bool also_cont = false, pid_t own_child = 0) const;
  static constexpr int kSignalRounds = 8;
  /// cgroup.kill: SIGKILL to every member, forks included. ENOENT where the
  /// kernel has no cgroup.kill (before 5.14).
  int kill() const;
  /// cgroup.freeze 1 / 0.
  int freeze(bool on) const;
  /// cgroup.freeze reads 1.
  bool frozen() const;

  /// usage_usec of cpu.stat (every member's, the gone ones' included).
  std::optional<std::uint64_t> cpu_usec() const;
  /// cpu.stat opened for reading, to sample it again and again with one
  /// pread(2) each (cpu_usec(int)) rather than an open, read and close.
  int open_cpu_stat() const;
  static std::optional<std::uint64_t> cpu_usec(int stat_fd);
  /// oom_kill of memory.events; nullopt without the memory controller.
  std::optional<std::uint64_t> oom_kills() const;
  /// Writes `value` to FILE (memory.max, cpu.max, pids.max...).
  int set(const char* file, const std::string& value) const;

 private:
  std::string path_;
};

/// The name of a command's cgroup in the subtree: cmd-ID-N, N never used
/// twice (the recovery of a torn monitor.json finds it by ID).
std::string command_cgroup_name(const std::string& id, std::uint64_t n);
/// The ID in such a name; nothing for any other name.
std::optional<std::string> command_cgroup_id(const std::string& name);

/// Makes a command's cgroup NAME in the subtree (and the subtree first,
/// with its controllers, when it is not there). Fills `out`; 0 or an errno.
int create_command_cgroup(const CgroupHierarchy& h, const std::string& name, Cgroup* out);

/// The text of a small cgroup file (nullopt when it cannot be read).
std::optional<std::string> read_cgroup_file(const std::string& path);

}  // namespace sup
