// sbxfs-monitor: shared declarations.
// The on-disk contract is supervisor/FORMAT.md; main.cpp documents the
// command line and the report protocol. What the daemon shares with the
// monitor (the record files, /proc, cgroups, signal names, the clock, atomic
// writes, the job protocol) is in the core library, sbx_core.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "supervisor/atomic_write.hpp"
#include "supervisor/cgroup.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/monitor_record.hpp"
#include "supervisor/restart_policy.hpp"

namespace sbxmon {

using sup::write_all;

// ---- util.cpp ---------------------------------------------------------------

// Short diagnostic on stderr, prefixed with "sbxfs-monitor[PID]: ".
void diag(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Parses a non-negative decimal that fits in uint64_t. False on junk.
bool parse_u64(const char* s, uint64_t* out);

// ---- signal_tree.cpp --------------------------------------------------------

// Sends sig (then SIGCONT when also_cont) to the process group `group`
// and to every live descendant of the calling process (itself excluded)
// that is not in that group: each process gets it once.
// group_usable: the group id is known not to be recycled (its leader has
// not been reaped yet); otherwise the group is signalled only when a
// descendant is seen in it. Returns the number of descendants found.
size_t signal_tree(pid_t group, bool group_usable, int sig, bool also_cont);

// ---- relay.cpp --------------------------------------------------------------

// One of the command's output streams.
struct Stream {
  const char* name = "";  // "stdout" / "stderr" (for diagnostics)
  int pipe = -1;          // read end of the command's pipe (O_NONBLOCK); -1 at EOF
  bool grown = false;     // the pipe was grown (or refused to grow)
};

// Moves output from the streams' pipes into `log` and `index` (see
// relay.cpp); past half of log_max, into the tail segments it rotates.
class Relay {
 public:
  enum class Result { moved, empty, closed };
  // The most one read takes.
  static constexpr size_t kReadBuffer = 256 * 1024;

  // `index` and `log` are created in dirfd by open_log(), or at the first
  // output. log_max: bytes kept, 0 = no limit.
  Relay(int dirfd, uint64_t log_max, Stream& out, Stream& err);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  // Creates `log` (done after the start's report; else at the first output).
  bool open_log();
  // One read of s.pipe, written out. Closes s.pipe at EOF.
  Result pump(Stream& s);
  // Reads both pipes in turn until each is empty or at EOF (bounded).
  void drain();
  // Bytes of output dropped by log_max (read and not kept).
  uint64_t dropped() const { return dropped_; }
  // A line of sbxfs's own between two runs (restart policy): a marker chunk
  // of kind restart. `text` holds no newline.
  void restart_marker(const std::string& text);
  // Bytes of output the log could not take (a write failed: disk full).
  uint64_t log_lost() const { return log_lost_; }

 private:
  // Where output goes: the head (`log`, `index`) or a tail segment.
  struct Part {
    int data = -1, index = -1;
    uint64_t generation = 0;  // 0: the head
    uint64_t bytes = 0;       // in its data file
    uint64_t entries = 0;     // in its index
    uint64_t index_bytes = 0; // its index's size: the header and the whole entries
    uint64_t start = 0;       // position of its first byte in the whole output
  };

  // The bytes of one read: to the head while it has room, then the tail.
  // A marker chunk says its kind (a restart's).
  void keep(sup::LogStream stream, const char* buf, size_t len, int64_t time_us,
            sup::MarkerKind kind = sup::MarkerKind::log_max);
  void keep_in_tail(sup::LogStream stream, const char* buf, size_t len, int64_t time_us, sup::MarkerKind kind);
  // Writes buf to the part's data file and indexes what reached it; returns that.
  uint64_t append(Part& p, sup::LogStream stream, const char* buf, size_t len, int64_t time_us,
                  sup::MarkerKind kind = sup::MarkerKind::log_max);
  // The whole output's position: markers count once, and in each stream's.
  uint64_t whole_pos() const { return out_pos_ + err_pos_ + marks_; }
  // Bytes part p may still take, given its cap.
  uint64_t room(const Part& p, uint64_t cap) const;
  // A new tail segment; false (and nothing changed) when it cannot be made.
  bool rotate(int64_t time_us);
  // `len` bytes a newer segment would push out before this read ends:
  // counted as dropped, never written.
  void skip(sup::LogStream stream, size_t len);
  void remove_oldest();
  void count_dropped();
  void grow(Stream& s);
  void note(int* state, const char* name, int err);
  // Appends one entry to the part's index; a write that failed takes back
  // what reached the file (a torn entry would shift every later one).
  int add_entry(Part& p, const char* entry);

  int dirfd_;
  uint64_t log_max_;
  sup::LogCaps caps_;
  Stream &out_, &err_;
  size_t read_max_ = kReadBuffer;  // one read's cap: less with log_max
  Part head_;              // log and index (data/index -1 until made)
  Part tail_[3];           // the tail segments kept, oldest first (a third while one is made)
  int tails_ = 0;
  bool head_done_ = false;  // the tail has begun
  uint64_t run_id_ = 0;
  uint64_t generation_ = 0;  // of the newest segment made
  uint64_t chunks_ = 0;      // chunks numbered so far (the dropped ones too)
  uint64_t out_pos_ = 0, err_pos_ = 0;  // bytes of each stream so far (the dropped ones too), markers apart
  uint64_t marks_ = 0;       // bytes of marker lines (restarts), which readers count in both streams
  char last_byte_ = '\n';    // the last byte kept: a marker goes on a line of its own
  sup::LogStream last_stream_ = sup::LogStream::out;  // whose output that byte was (a marker's: the one before)
  uint64_t head_end_ = 0;    // bytes in the head, once the tail has begun
  int index_state_ = 0;      // errno of the last write to an index
  int log_state_ = 0;        // errno of the last write to a data file
  int tail_state_ = 0;       // errno of the last attempt to make a segment
  uint64_t dropped_ = 0;     // bytes past log_max no longer kept
  int dropped_fd_ = -1;      // "dropped", created at the first dropped byte
  uint64_t log_lost_ = 0;
};

// ---- monitor_loop.cpp -------------------------------------------------------

// Everything the event loop needs; set up by main.cpp.
struct Monitor {
  int dirfd = -1;        // the record folder
  int sigfd = -1;        // signalfd: SIGCHLD, SIGTERM, SIGINT, SIGHUP
  int ctlfd = -1;        // the ctl FIFO, opened read-write
  // --stdin pipe: a write end of the `stdin` FIFO, never written: while it is
  // held the command never reads EOF (a daemon that dies or restarts closes
  // only its own); -1 once `eof` closed the input (or without --stdin pipe).
  int stdin_w = -1;
  Relay* relay = nullptr;
  Stream out, err;       // the command's stdout and stderr
  int timeout_tfd = -1;  // timerfd, armed when a timeout was given
  int kill_tfd = -1;     // timerfd for the kill grace and the SIGKILL sweeps
  pid_t root = -1;       // the command (pid == pgid == sid)
  uint64_t grace_ms = 5000;
  long long oom_at_start = -1;  // /proc/vmstat oom_kill when the monitor started
  // --cgroup: the command's own cgroup (empty: tracked as a process tree).
  // Then the end is also `populated 0`, signals go to its members, a kill
  // is cgroup.kill.
  sup::Cgroup cg;
  int cg_events = -1;  // its cgroup.events (poll POLLPRI)
  // --restart: when a run ends, the loop may start another (the cgroup
  // stays, empty, between runs; the record ends only when the policy is over).
  sup::RestartPolicy restart = sup::RestartPolicy::no;
  uint64_t restart_delay_ms = 1000;           // the first delay
  std::optional<uint64_t> max_restarts;       // none: no limit
  int restart_tfd = -1;                       // timerfd of the delay between runs
  uint64_t timeout_ms = 0;                    // --timeout-ms, armed again for each run
  sup::MonitorInfo info;                      // monitor.json as last written
  // Forks the next run (new pipes in out/err), calls `publish` with it
  // before it may exec (so that monitor.json names a run before its first
  // instruction, as for the first run), and waits for its exec: 0, or an
  // errno with `why` (the child is reaped then). *pid: the child, or -1.
  std::function<int(pid_t* pid, std::string* why, const std::function<void(pid_t)>& publish)> spawn;
  int notify = -1;     // --notify-fd: the read end of the command's notification pipe
  int notify_w = -1;   // and its write end, which every run gets as fd --notify-fd
};

// Runs until the whole tree has ended (under a restart policy: until the
// policy is over), writes exit.json. Returns the monitor's exit status.
int run_loop(Monitor& m);

// The read end a run of the command gets as its stdin with --stdin pipe: the
// record's `stdin` FIFO opened anew, blocking as programs expect, so every
// run (a restart too) reads the same input. -1 once the input was closed
// (the FIFO is gone; that run reads /dev/null).
int open_stdin_for_run(int dirfd);

// ---- exec_command.cpp --------------------------------------------------------

// execve of argv[0], looked up in envp's PATH (default
// /usr/local/bin:/usr/bin:/bin) unless it holds a '/'. Unlike execvp, a file
// the kernel refuses as not a program (ENOEXEC) is not run through /bin/sh.
// Returns only on failure, with the errno. Async-signal-safe: it runs between
// fork and exec.
int exec_command(char* const argv[], char* const envp[]);

// ---- shared_clone.cpp ---------------------------------------------------------

// Starts a process that shares this one's memory until it execs (clone(2)
// with CLONE_VM, on a stack of its own, as posix_spawn does): no page table
// is copied and none torn down at the exec. On this kind of machine a fork
// of even a small static process costs about 1.1 ms and this 0.03 ms
// (bench/RESULTS.md, "A command's process without a copy of the monitor").
// Unlike vfork the caller goes on at once, so the child may wait (for the
// go) while the monitor reports. `fn` runs in the child and must not
// return; it may use only async-signal-safe calls and must not touch what
// the caller changes meanwhile (errno is shared too: the child is built
// without sanitizer calls, and sets errno only on the way to its _exit).
// The caller must not start another before this child has exec'd or ended
// (its stack is reused). -1 with errno when no process was made.
//
// With `cgroup_dir` (a cgroup v2 directory, open_dir()), the child is born
// in that cgroup (clone3's CLONE_INTO_CGROUP). Joining it later by a write
// to cgroup.procs takes the kernel's cgroup threadgroup lock for writing,
// which waits for an RCU grace period once the lock has been idle: 7-14 ms
// a start on an idle machine here, against 0.5 ms for a fork born in the
// cgroup (bench/RESULTS.md, "A command born in its cgroup"). -1 with errno
// where that is refused (the cgroup's error) or unsupported (ENOSYS, EINVAL
// before Linux 5.7, another architecture): the caller then joins by
// cgroup.procs, which reports what is wrong.
pid_t clone_sharing_memory(int (*fn)(void*), void* arg, int cgroup_dir = -1);

// Maps the children's stack now. The server calls it once, so that the
// monitors it forks inherit the mapping and the pointer to it: none of
// them dirties a page of its own for that pointer (its page of .bss).
void prepare_child_stack();

// The child has exec'd or ended: the pages its stack used go back to the
// kernel (the mapping stays for a next run). About 8 KiB a monitor.
void release_child_stack();

// Every signal this process inherited as ignored is set back to its default,
// the C library's reserved ones too (util.cpp; once, at the start of the
// server or of a command-line monitor), so that a command's process has only
// the monitor's own SIGPIPE to reset.
void reset_ignored_signals();

// ---- main.cpp / server.cpp ---------------------------------------------------

// Starts the command described by a monitor command line (argv[0] is
// ignored) and supervises it; returns the exit status. detach: fork first
// and let the caller's process exit (the plain command-line form).
int run_monitor(int argc, char** argv, bool detach);

// `sbxfs-monitor --serve`: forks a monitor per job read from fd 0.
int serve();

}  // namespace sbxmon
