// sbxfs-monitor: the per-command monitor (conmon / s6-supervise pattern).
//
//   sbxfs-monitor --dir RECORD_DIR [--timeout-ms N] [--grace-ms N] [--log-max BYTES]
//                 [--uid N --gid N [--groups G,G,...]] [--cgroup DIR] [--stdin pipe]
//                 [--restart on-failure|always [--restart-delay-ms N] [--max-restarts N]]
//                 [--notify-fd N] [--script FILE] [--simple] [--enter-as-user] -- ARGV0 ARGS...
//
// --uid/--gid/--groups: the command (not the monitor) runs with these
// credentials: with allow_other, as the user who wrote the request.
// --script: FILE, an argument of the command, is a long shell text in the
// state directory, which that user could not open: the monitor copies it
// once into a memfd it keeps, and the command reads /proc/self/fd/N instead.
//
// RECORD_DIR is the command's folder in the state directory (normally
// STATE/staging/new-<id>~<n>, see supervisor/FORMAT.md). --timeout-ms: stop the
// command (as a `term` request) N ms after exec; absent or 0 = no timeout.
// --grace-ms: time between SIGTERM and SIGKILL on a stop (default 5000).
// --log-max: output bytes kept in the log; later output is drained and
// counted in `dropped` (relay.cpp). Absent or 0 = no limit.
// --cgroup: an empty cgroup v2 directory made for the command: the
// command's process is born in it (or joins it before anything else, and
// before its exec), so none of the command's processes runs outside;
// the record ends when it is empty too, and the monitor removes it then
// (supervisor/cgroup.hpp). monitor.json names it.
// --stdin pipe: the command reads the FIFO `stdin` of RECORD_DIR (made here)
// as its standard input; without it, /dev/null. The monitor holds a write
// end until a ctl `eof` (FORMAT.md, "stdin").
// --restart: the restart policy (supervisor/restart_policy.hpp), run here so
// that it goes on while no daemon runs: a run that ended is followed by
// another after the delay (--restart-delay-ms, default 1000, doubling after
// short runs), at most --max-restarts times; each run starts in the
// command's working directory and writes on into the same log after a
// marker line; monitor.json is written again for each run. A `term` or
// `kill` request ends the policy, also during a delay.
// --notify-fd: the command's descriptor N (>= 3) is the write end of a pipe;
// its first newline there makes the monitor write `notified` (the time) in
// RECORD_DIR: the command says it is ready (the s6 notification-fd convention).
// --simple: ARGV is /bin/sh -c TEXT, shell text; when TEXT is one simple
// command of plain words, the command's process executes those words
// itself, with the environment dash would give them, and /bin/sh -c TEXT
// only if that exec fails (supervisor/simple_command.hpp).
// --enter-as-user (with --uid): the command enters the working directory
// again by its path once it has the user's rights, so that a path the
// monitor (root) resolved cannot take it where its user could not go.
// The command gets the monitor's environment and working directory; ARGV0
// is looked up in PATH unless it contains a '/' (as execvp does, but a file
// that is not a program is refused with ENOEXEC, never run by /bin/sh).
//
// Report protocol, on the monitor's stdout (lines, then EOF):
//   ok PID\n              the command was exec'd, monitor.json is written
//   err ERRNO MESSAGE\n   nothing runs; the monitor exits with status 1
// Run this way, the process started exits 0 at once after forking the
// detached monitor; the caller reads stdout until EOF to get the line.
// Diagnostics go to stderr.
//
// Forked by the server, stdin is the go socket and one more line comes
// first: `forked PID` once the command is forked and monitor.json written;
// the command then waits for one byte on the go socket before its exec
// (the supervisor publishes the record meanwhile, so the command finds it)
// and exits without exec at EOF. Then `ok PID` or `err ...` as above; after
// an `err`, monitor.json is gone again.
//
//   sbxfs-monitor --serve
//
// The fork server the supervisor starts once (server.cpp): it forks a
// monitor for each job sent on its stdin socket, so a start costs no exec
// of the monitor and no detaching fork. A job carries the same arguments.
//
// Files in RECORD_DIR (all opened relative to a directory fd, so renaming
// the folder while the monitor runs is fine): ctl (FIFO), stdin (FIFO), log, stdout,
// stderr, monitor.json, exit.json, dropped. The loop is in monitor_loop.cpp.
#include "monitor.hpp"

#include "supervisor/clock.hpp"
#include "supervisor/exit_record.hpp"
#include "supervisor/monitor_ctl.hpp"
#include "supervisor/monitor_job.hpp"
#include "supervisor/monitor_record.hpp"
#include "supervisor/proc_tree.hpp"
#include "supervisor/simple_command.hpp"
#include "supervisor/unique_fd.hpp"

#include <dirent.h>
#include <grp.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

using namespace sbxmon;

namespace {

constexpr const char* kUsage =
    "usage: sbxfs-monitor --dir DIR [--timeout-ms N] [--grace-ms N] [--log-max BYTES] "
    "[--uid N --gid N [--groups G,...]] [--cgroup DIR] [--stdin pipe] "
    "[--restart on-failure|always [--restart-delay-ms N] [--max-restarts N]] [--notify-fd N] -- ARGV0 ARGS...";

int g_dirfd = -1;
bool g_ctl_created = false;

// One line on the report pipe (stdout). A gone reader is not an error here.
void report(const std::string& line) {
  std::string s = line;
  s += '\n';
  (void)write_all(1, s.data(), s.size());
}

// Keeps MESSAGE on one line and printable.
std::string one_line(const std::string& in, size_t max = 1024) {
  std::string out;
  for (char c : in) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    unsigned char u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  return out;
}

[[noreturn]] void fail(int err, const std::string& message) {
  report(std::string(sup::kReportErr) + " " + std::to_string(err) + " " + one_line(message));
  diag("%s", one_line(message).c_str());
  if (g_ctl_created && g_dirfd >= 0) {
    ::unlinkat(g_dirfd, sup::kCtlFile, 0);
    ::unlinkat(g_dirfd, sup::atomic_tmp_name(sup::kExitFile).c_str(), 0);
  }
  ::_exit(1);
}

std::string errmsg(const char* what, int err) {
  return std::string(what) + ": " + ::strerror(err);
}

void ensure_std_fds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0 || errno != EBADF) continue;
    int n = ::open("/dev/null", O_RDWR);
    if (n >= 0 && n != fd) {
      ::dup2(n, fd);
      ::close(n);
    }
  }
}

void close_other_fds() {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
#endif
  // Fallback: list /proc/self/fd first, then close (closing while reading
  // the directory would close the directory's own fd).
  std::vector<int> fds;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    int self = ::dirfd(d);
    while (struct dirent* de = ::readdir(d)) {
      int fd = ::atoi(de->d_name);
      if (fd >= 3 && fd != self) fds.push_back(fd);
    }
    ::closedir(d);
    for (int fd : fds) ::close(fd);
  } else {
    long max = ::sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = 3; fd < max; ++fd) ::close(fd);
  }
}

struct Args {
  const char* dir = nullptr;
  uint64_t timeout_ms = 0;
  uint64_t grace_ms = 5000;
  uint64_t log_max = 0;
  bool has_uid = false, has_gid = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string cgroup;  // empty: none
  bool stdin_pipe = false;
  sup::RestartPolicy restart = sup::RestartPolicy::no;
  uint64_t restart_delay_ms = 1000;
  std::optional<uint64_t> max_restarts;
  int notify_fd = -1;  // --notify-fd; -1: none
  const char* script = nullptr;  // --script; null: none
  bool simple = false;           // --simple
  bool enter_as_user = false;    // --enter-as-user
  char** argv = nullptr;
  // With --simple and a simple command: its words and environment, tried
  // first (prepare_simple); the environment with the given PWD where that
  // names the working directory at the exec, else the one with getcwd's.
  char** simple_argv = nullptr;
  char** simple_env = nullptr;
  char** simple_env_given_pwd = nullptr;
  const char* simple_given_pwd = nullptr;
};

bool parse_args(int argc, char** argv, Args* a) {
  int i = 1;
  for (; i < argc; ++i) {
    std::string opt = argv[i];
    if (opt == "--") {
      ++i;
      break;
    }
    if (opt == "--simple" || opt == "--enter-as-user") {  // the options without a value
      (opt == "--simple" ? a->simple : a->enter_as_user) = true;
      continue;
    }
    std::string value;
    size_t eq = opt.find('=');
    if (opt.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = opt.substr(eq + 1);
      opt.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return false;
    }
    if (opt == "--dir") {
      // Point into argv (the value is the tail of argv[i] in both forms).
      a->dir = argv[i] + (::strlen(argv[i]) - value.size());
    } else if (opt == "--timeout-ms") {
      if (!parse_u64(value.c_str(), &a->timeout_ms)) return false;
    } else if (opt == "--grace-ms") {
      if (!parse_u64(value.c_str(), &a->grace_ms)) return false;
    } else if (opt == "--log-max") {
      if (!parse_u64(value.c_str(), &a->log_max)) return false;
    } else if (opt == "--uid" || opt == "--gid") {
      uint64_t v = 0;
      if (!parse_u64(value.c_str(), &v) || v > 0xfffffffeu) return false;
      if (opt == "--uid") {
        a->uid = static_cast<uid_t>(v);
        a->has_uid = true;
      } else {
        a->gid = static_cast<gid_t>(v);
        a->has_gid = true;
      }
    } else if (opt == sup::kJobStdin) {
      if (value != sup::kJobStdinPipe && value != "null") return false;
      a->stdin_pipe = value == sup::kJobStdinPipe;
    } else if (opt == sup::kJobCgroup) {
      if (value.empty() || value[0] != '/') return false;
      a->cgroup = value;
    } else if (opt == "--restart") {
      auto p = sup::parse_restart_policy(value);
      if (!p) return false;
      a->restart = *p;
    } else if (opt == "--restart-delay-ms") {
      if (!parse_u64(value.c_str(), &a->restart_delay_ms) || a->restart_delay_ms == 0) return false;
    } else if (opt == "--max-restarts") {
      uint64_t n = 0;
      if (!parse_u64(value.c_str(), &n)) return false;
      a->max_restarts = n;
    } else if (opt == "--notify-fd") {
      uint64_t v = 0;
      if (!parse_u64(value.c_str(), &v) || v < 3 || v > 1023) return false;
      a->notify_fd = static_cast<int>(v);
    } else if (opt == "--script") {
      a->script = argv[i] + (::strlen(argv[i]) - value.size());
      if (value.empty()) return false;
    } else if (opt == "--groups") {
      size_t pos = 0;
      while (pos < value.size()) {
        size_t comma = value.find(',', pos);
        if (comma == std::string::npos) comma = value.size();
        uint64_t g = 0;
        if (!parse_u64(value.substr(pos, comma - pos).c_str(), &g) || g > 0xfffffffeu) return false;
        a->groups.push_back(static_cast<gid_t>(g));
        pos = comma + 1;
      }
    } else {
      return false;
    }
  }
  if (a->dir == nullptr || *a->dir == '\0' || i >= argc) return false;
  if (a->has_uid != a->has_gid) return false;  // both or neither
  a->argv = argv + i;
  return true;
}

// A FIFO in the record folder. One found there is kept (the supervisor
// makes ctl ahead in the folders it keeps for starts:
// supervisor/start_folder.hpp); anything else of that name is replaced.
void make_fifo(int dirfd, const char* name) {
  if (::mkfifoat(dirfd, name, 0600) == 0) return;
  int e = errno;
  struct stat st;
  if (e == EEXIST && ::fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISFIFO(st.st_mode)) return;
  if (e != EEXIST || ::unlinkat(dirfd, name, 0) != 0 || ::mkfifoat(dirfd, name, 0600) != 0)
    fail(e, errmsg((std::string("cannot create ") + name).c_str(), e));
}

// --script: the text in a memfd (its inode is 0777: the command's user may
// open it through its own descriptor, which crosses no folder of the state
// directory), not close-on-exec so that each run's exec keeps it, and the
// command's argument FILE replaced by /proc/self/fd/N.
void read_script_as_fd(Args& args) {
  sup::UniqueFd src(::open(args.script, O_RDONLY | O_CLOEXEC));
  if (!src) fail(errno, errmsg((std::string("cannot open '") + args.script + "'").c_str(), errno));
  int fd = ::memfd_create("sbxfs-script", 0);
  // Above the descriptor a readyFd command gets, which dup2 would replace.
  if (fd >= 0 && fd <= args.notify_fd) {
    const int high = ::fcntl(fd, F_DUPFD, args.notify_fd + 1);
    ::close(fd);
    fd = high;
  }
  if (fd < 0) fail(errno, errmsg("memfd_create", errno));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(src.get(), buf, sizeof buf);
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || ::write(fd, buf, static_cast<size_t>(n)) != n)
      fail(errno, errmsg((std::string("cannot copy '") + args.script + "'").c_str(), errno));
  }
  static std::string path;  // args.argv points here from now on
  path = "/proc/self/fd/" + std::to_string(fd);
  for (char** a = args.argv; *a != nullptr; ++a)
    if (::strcmp(*a, args.script) == 0) *a = path.data();
}

// Whether `path` names the working directory, as dash decides whether to
// keep PWD. In the command's process (no sanitizer calls: monitor.hpp).
__attribute__((no_sanitize("address", "undefined"))) bool names_this_dir(const char* path) {
  struct stat a, b;
  return ::stat(path, &a) == 0 && ::stat(".", &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// --simple: the words and environments the command's process tries first,
// made before the command shares this memory. Text that is not one simple
// command, or an environment dash would change otherwise, runs as given.
// The kept environment entries are environ's own. `keep` lives as long as
// the monitor's runs (it is on run_monitor's stack, whose pages are in use
// anyway: statics would dirty a page of their own in every monitor).
struct SimpleExec {
  std::vector<std::string> words;
  std::string given_pwd, here_pwd;  // "PWD=..."
  std::vector<char*> argv, env_given, env_here;
};

void prepare_simple(Args& args, SimpleExec& keep) {
  char** a = args.argv;
  if (!args.simple || ::strcmp(a[0], "/bin/sh") != 0 || a[1] == nullptr || ::strcmp(a[1], "-c") != 0 ||
      a[2] == nullptr || a[3] != nullptr)
    return;
  std::optional<std::vector<std::string>> words = sup::simple_command_words(a[2]);
  if (!words) return;
  // The working directory of every run (a restart changes to the path
  // taken now, getcwd's too).
  char small[512];  // getcwd(NULL, 0) would take (and dirty) a heap page of PATH_MAX
  std::string here;
  if (const char* cwd = ::getcwd(small, sizeof small)) {
    here = cwd;
  } else if (char* big = errno == ERANGE ? ::getcwd(nullptr, 0) : nullptr) {
    here = big;
    ::free(big);
  } else {
    return;
  }
  std::size_t n = 0;
  while (environ[n] != nullptr) ++n;
  std::optional<sup::SimpleEnv> env = sup::simple_command_env(std::vector<std::string_view>(environ, environ + n));
  if (!env) return;
  keep.words = std::move(*words);
  keep.here_pwd = "PWD=" + here;
  keep.argv.reserve(keep.words.size() + 1);
  for (std::string& w : keep.words) keep.argv.push_back(w.data());
  keep.argv.push_back(nullptr);
  auto with = [&](std::vector<char*>& out, std::string& pwd) {
    out.reserve(env->kept.size() + 2);
    for (std::size_t i : env->kept) out.push_back(environ[i]);
    out.push_back(pwd.data());
    out.push_back(nullptr);
  };
  with(keep.env_here, keep.here_pwd);
  if (env->pwd) {
    keep.given_pwd = "PWD=" + *env->pwd;
    with(keep.env_given, keep.given_pwd);
    args.simple_env_given_pwd = keep.env_given.data();
    args.simple_given_pwd = keep.given_pwd.c_str() + 4;
  }
  args.simple_argv = keep.argv.data();
  args.simple_env = keep.env_here.data();
}

struct itimerspec ms_to_its(uint64_t ms) {
  struct itimerspec its = {};
  its.it_value.tv_sec = static_cast<time_t>(ms / 1000);
  its.it_value.tv_nsec = static_cast<long>((ms % 1000) * 1000000);
  if (ms == 0) its.it_value.tv_nsec = 1;  // 0 would disarm the timer
  return its;
}

// What the command's process needs before its exec (it shares the
// monitor's memory until then: these stay put while it runs).
struct ChildStart {
  const Args* args;
  int go_fd;          // >= 0: one byte from it first (EOF: the start was cancelled)
  int go_w;           // the gate's write end, which the monitor alone keeps (-1: none)
  int stdin_src;      // what becomes its fd 0 (/dev/null, or the stdin FIFO's read end)
  int out_w, err_w;   // its stdout and stderr
  int status_w;       // the exec's report (close-on-exec: EOF means it exec'd)
  int cgroup_procs;   // the cgroup's cgroup.procs to join, or -1
  const char* cwd;    // where to change to first (a restart: the monitor itself is in /)
  int notify_w;       // the notification pipe's write end, to become fd --notify-fd (-1: none)
};

// In the command's process: only async-signal-safe calls until the exec,
// and no sanitizer calls (its memory is the monitor's: monitor.hpp).
[[noreturn]] __attribute__((no_sanitize("address", "undefined"))) void exec_child(const ChildStart& c) {
  const Args& args = *c.args;
  int status_w = c.status_w;
  // The monitor's fd 1 is its report to the supervisor until the start is
  // reported: not held here while the go byte is awaited, so that a monitor
  // killed before its report is an EOF at once, not a start timeout.
  ::dup2(c.out_w, 1);
  // Into the command's cgroup before anything else runs here.
  int join_err = 0;
  if (c.cgroup_procs >= 0 && ::write(c.cgroup_procs, "0", 1) != 1) join_err = errno;
  // An ignored signal stays ignored across exec; handled ones are reset by
  // it. The monitor ignores SIGPIPE alone (main() reset what it inherited).
  struct sigaction sa;
  ::memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGPIPE, &sa, nullptr);
  sigset_t empty;
  ::sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  int err = join_err;
  // Not held here: the monitor's death must read as EOF at the gate.
  if (c.go_w >= 0) ::close(c.go_w);
  if (err == 0 && c.go_fd >= 0) {
    char go = 0;
    ssize_t n;
    do {
      n = ::read(c.go_fd, &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) err = ECANCELED;
  }
  // With the user's rights (below) where there are any: root's could
  // resolve the path through a folder that the user cannot search.
  if (err == 0 && c.cwd != nullptr && !args.has_uid && ::chdir(c.cwd) != 0) err = errno;
  if (err != 0) {
    // the supervisor did not publish it, or the run cannot start: no exec
  } else if (::setsid() < 0 || ::dup2(c.stdin_src, 0) < 0 || ::dup2(c.out_w, 1) < 0 || ::dup2(c.err_w, 2) < 0) {
    err = errno;
  } else if (args.has_uid &&
             (::setgroups(args.groups.size(), args.groups.data()) != 0 || ::setgid(args.gid) != 0 ||
              ::setuid(args.uid) != 0)) {
    err = errno;  // groups first, uid last: after setuid we could not change them
  } else if (args.has_uid && c.cwd != nullptr && ::chdir(c.cwd) != 0) {
    err = errno;
  } else if (c.notify_w >= 0 && (status_w == args.notify_fd &&
                                 (status_w = ::fcntl(status_w, F_DUPFD_CLOEXEC, args.notify_fd + 1)) < 0)) {
    err = errno;  // the exec's report must not be where the command's descriptor goes
  } else if (c.notify_w >= 0 && (c.notify_w == args.notify_fd ? ::fcntl(c.notify_w, F_SETFD, 0)
                                                              : ::dup2(c.notify_w, args.notify_fd)) < 0) {
    err = errno;
  } else {
    // A simple command's words first; where they cannot run, the shell
    // says why as it always did (127, "not found"), or runs a script.
    if (args.simple_argv != nullptr) {
      // As this user, in this run's folder: as dash decides at its start.
      const bool given = args.simple_given_pwd != nullptr && names_this_dir(args.simple_given_pwd);
      err = exec_command(args.simple_argv, given ? args.simple_env_given_pwd : args.simple_env);
    }
    if (args.simple_argv == nullptr || err != 0) err = exec_command(args.argv, environ);
  }
  ssize_t n;
  do {
    n = ::write(status_w, &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  ::_exit(127);
}

__attribute__((no_sanitize("address", "undefined"))) int child_main(void* start) {
  exec_child(*static_cast<const ChildStart*>(start));
}

// Starts a run: fresh stdout/stderr pipes (read ends, non-blocking, in
// m.out/m.err), fd 0 from stdin_src; with a cgroup (m.cg) the first run's
// child is born in it, or else joins it by cgroup.procs first, which
// reports the cgroup's error. Then it execs.
// A later run (a restart) always joins: once a cgroup was killed through
// cgroup.kill (a run's timeout or stop, or anyone's write), the kernel
// kills every child born into it by clone3 (6.18 here: the fork compares
// the parent cgroup's kill count with the target's), while a process that
// joins it, and what it forks there, live.
// The child shares the monitor's memory until its exec (clone_sharing_memory:
// a fork's copy cost ~1 ms a start here), so `start` (the caller's, on the
// monitor's stack: no page of its own to dirty) must stay until then.
// Returns the child (-1: errno set, nothing started) and the read end of its
// exec status pipe in *status_r; exec_outcome() must be called before the
// next run.
pid_t fork_run(const Args& args, Monitor& m, ChildStart& start, bool first_run, int go_fd, int go_w, int stdin_src,
               const char* cwd, int* status_r) {
  int outp[2] = {-1, -1}, errp[2] = {-1, -1}, statp[2] = {-1, -1};
  pid_t root = -1;
  int cgroup_dir = -1, cgroup_procs = -1;
  if (::pipe2(outp, O_CLOEXEC) == 0 && ::pipe2(errp, O_CLOEXEC) == 0 && ::pipe2(statp, O_CLOEXEC) == 0) {
    start = ChildStart{&args, go_fd, go_w, stdin_src, outp[1], errp[1], statp[1], -1, cwd, m.notify_w};
    if (m.cg.empty()) {
      root = clone_sharing_memory(child_main, &start);
    } else {
      // Born in the cgroup; where that fails (no child was made), or for a
      // later run, the child joins by cgroup.procs, as before clone3, and
      // reports the cgroup's error.
      if (first_run && (cgroup_dir = m.cg.open_dir()) >= 0)
        root = clone_sharing_memory(child_main, &start, cgroup_dir);
      if (root < 0 && (cgroup_procs = m.cg.open_procs()) >= 0) {
        start.cgroup_procs = cgroup_procs;
        root = clone_sharing_memory(child_main, &start);
      }
    }
  }
  const int e = errno;
  if (cgroup_dir >= 0) ::close(cgroup_dir);
  if (cgroup_procs >= 0) ::close(cgroup_procs);
  for (int fd : {outp[1], errp[1], statp[1]})
    if (fd >= 0) ::close(fd);
  if (root < 0) {
    for (int fd : {outp[0], errp[0], statp[0]})
      if (fd >= 0) ::close(fd);
    errno = e;
    return -1;
  }
  m.out.pipe = outp[0];
  m.err.pipe = errp[0];
  m.out.grown = m.err.grown = false;
  ::fcntl(m.out.pipe, F_SETFL, ::fcntl(m.out.pipe, F_GETFL) | O_NONBLOCK);
  ::fcntl(m.err.pipe, F_SETFL, ::fcntl(m.err.pipe, F_GETFL) | O_NONBLOCK);
  *status_r = statp[0];
  return root;
}

// Waits for the exec of `root`: 0, or the child's errno (then it is reaped).
int exec_outcome(int status_r, pid_t root) {
  int child_err = 0;
  size_t got = 0;
  while (got < sizeof child_err) {
    ssize_t n = ::read(status_r, reinterpret_cast<char*>(&child_err) + got, sizeof child_err - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(status_r);
  // EOF: exec'd (or killed); else reaped below. Its stack is free either way.
  if (got == 0) {
    release_child_stack();
    return 0;
  }
  while (::waitpid(root, nullptr, 0) < 0 && errno == EINTR) {
  }
  release_child_stack();
  return got == sizeof child_err ? child_err : EIO;
}

std::string exec_error(const Args& args, int e) {
  std::string why = errmsg((std::string("cannot execute '") + args.argv[0] + "'").c_str(), e);
  if (e == ENOEXEC) why += " (neither a program for this machine nor a script starting with #!; argv runs no shell)";
  return why;
}

// monitor.json could not be written: undo the start completely.
[[noreturn]] void abort_started(pid_t root, int err, const std::string& message, const sup::Cgroup& cg) {
  bool root_reaped = false;
  if (!cg.empty()) cg.kill();
  for (;;) {
    signal_tree(root, !root_reaped, SIGKILL, false);
    pid_t p = ::waitpid(-1, nullptr, __WALL);
    if (p == root) root_reaped = true;
    if (p < 0 && errno != EINTR) break;
  }
  fail(err, message);
}

}  // namespace

int sbxmon::open_stdin_for_run(int dirfd) {
  // O_NONBLOCK for the open alone: a blocking open for reading waits for a writer.
  int fd = ::openat(dirfd, sup::kStdinFile, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int sbxmon::run_monitor(int argc, char** argv, bool detach) {
  Args args;
  if (!parse_args(argc, argv, &args)) {
    report(std::string(sup::kReportErr) + " " + std::to_string(EINVAL) + " " + kUsage);
    diag("%s", kUsage);
    return 1;
  }

  // 1. Only 0, 1, 2 survive; then the folder, by fd from here on.
  close_other_fds();
  int dirfd = ::open(args.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) fail(errno, errmsg((std::string("cannot open '") + args.dir + "'").c_str(), errno));
  g_dirfd = dirfd;

  // Signals: default dispositions (an inherited SIG_IGN would discard them
  // before signalfd sees them; SIG_IGN for SIGCHLD would auto-reap), blocked
  // before the detaching fork so there is no window where they kill us.
  struct sigaction sa;
  ::memset(&sa, 0, sizeof sa);
  ::sigemptyset(&sa.sa_mask);
  sa.sa_handler = SIG_DFL;
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) ::sigaction(s, &sa, nullptr);
  sa.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &sa, nullptr);
  sigset_t mask;
  ::sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) ::sigaddset(&mask, s);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);

  Monitor m;
  ChildStart child_start{};  // what each run's process reads until its exec (fork_run)
  SimpleExec simple;         // --simple: what it tries first (prepare_simple)
  m.dirfd = dirfd;
  m.grace_ms = args.grace_ms;
  m.oom_at_start = sup::read_oom_kill_count();

  // 2. Detach: the caller waits for this process, the monitor lives on.
  // (Forked by the server, we are already a child nobody waits for.)
  if (detach) {
    pid_t p = ::fork();
    if (p < 0) fail(errno, errmsg("cannot fork the monitor", errno));
    if (p > 0) ::_exit(0);
  }
  ::setsid();
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    fail(errno, errmsg("cannot become a subreaper", errno));
  m.sigfd = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (m.sigfd < 0) fail(errno, errmsg("signalfd", errno));

  // 3. ctl (log comes after the report, stdout and stderr with their first
  // byte: relay.cpp).
  make_fifo(dirfd, sup::kCtlFile);
  g_ctl_created = true;
  // The space the end's record needs, before anything runs: a command whose
  // end could not be written would be a record that lies (the folder was
  // made ahead with it, as a rule: then this is one look at its size).
  if (int e = sup::reserve_file(dirfd, sup::atomic_tmp_name(sup::kExitFile).c_str(), sup::kExitFileReserve))
    fail(e, errmsg("no space for the record of its end (exit.json)", e));
  m.ctlfd = ::openat(dirfd, sup::kCtlFile, O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (m.ctlfd < 0) fail(errno, errmsg("cannot open ctl", errno));
  m.out.name = "stdout";  // created at their first byte (relay.cpp)
  m.err.name = "stderr";
  m.kill_tfd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (m.kill_tfd < 0) fail(errno, errmsg("timerfd_create", errno));
  if (args.timeout_ms > 0) {
    m.timeout_tfd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (m.timeout_tfd < 0) fail(errno, errmsg("timerfd_create", errno));
  }
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull < 0) fail(errno, errmsg("cannot open /dev/null", errno));
  if (!args.cgroup.empty()) {
    m.cg = sup::Cgroup(args.cgroup);
    m.cg_events = m.cg.open_events();
    if (m.cg_events < 0) fail(errno, errmsg(("cannot open the cgroup " + args.cgroup).c_str(), errno));
  }

  if (args.script) read_script_as_fd(args);
  prepare_simple(args, simple);

  // 4. Pipes and the command.
  int notifyp[2] = {-1, -1};
  if (args.notify_fd >= 0) {
    // Made once: every run gets its write end (the monitor keeps it, so the
    // read end never reads EOF between runs).
    if (::pipe2(notifyp, O_CLOEXEC) != 0) fail(errno, errmsg("pipe", errno));
    ::fcntl(notifyp[0], F_SETFL, ::fcntl(notifyp[0], F_GETFL) | O_NONBLOCK);
    m.notify = notifyp[0];
    m.notify_w = notifyp[1];
  }
  Relay relay(dirfd, args.log_max, m.out, m.err);
  m.relay = &relay;
  int stdin_r = -1;
  if (args.stdin_pipe) {
    // The command's read end first: a non-blocking open for writing needs a reader.
    make_fifo(dirfd, sup::kStdinFile);
    stdin_r = open_stdin_for_run(dirfd);
    if (stdin_r < 0) fail(errno, errmsg("cannot open stdin", errno));
    m.stdin_w = ::openat(dirfd, sup::kStdinFile, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (m.stdin_w < 0) fail(errno, errmsg("cannot open stdin for writing", errno));
  }
  // Each later run starts where the first did: taken before the first runs,
  // which may remove it (a later run then cannot start, as it should).
  std::string cwd;
  if (args.restart != sup::RestartPolicy::no || args.enter_as_user)
    if (char* here = ::getcwd(nullptr, 0)) {
      cwd = here;
      ::free(here);
    }
  if (args.enter_as_user && args.has_uid && cwd.empty()) fail(errno, errmsg("cannot tell the working directory", errno));
  std::string started_at = sup::iso_now();
  // Forked by the server, stdin is the go socket (server.cpp).
  const int go_fd = detach ? -1 : 0;
  int status_r = -1;
  pid_t root = fork_run(args, m, child_start, true, go_fd, -1, stdin_r >= 0 ? stdin_r : devnull,
                        args.enter_as_user && args.has_uid ? cwd.c_str() : nullptr, &status_r);
  if (root < 0) fail(errno, errmsg("cannot fork", errno));
  if (stdin_r >= 0) ::close(stdin_r);  // the command's alone
  if (go_fd >= 0) ::dup2(devnull, go_fd);  // the command alone holds it now

  // 5. monitor.json (the pid is known, and it holds still: its start time
  // does not change at exec); with the server, "forked PID" and the go.
  pid_t self = ::getpid();
  sup::ProcStat mst, cst;
  if (!sup::read_proc_stat(self, &mst)) abort_started(root, EIO, "cannot read /proc/self/stat", m.cg);
  if (!sup::read_proc_stat(root, &cst)) abort_started(root, EIO, "cannot read the command's /proc stat", m.cg);
  sup::MonitorInfo info;
  info.monitor_pid = self;
  info.monitor_start = mst.starttime;
  info.pid = root;
  info.pid_start = cst.starttime;
  info.started_at = started_at;
  info.cgroup = m.cg.path();
  if (int e = sup::write_file_atomic_at(dirfd, sup::kMonitorFile, sup::format_monitor(info)))
    abort_started(root, e, errmsg("cannot write monitor.json", e), m.cg);
  if (go_fd >= 0) report(std::string(sup::kReportForked) + " " + std::to_string(root));

  // 6. Did the exec work?
  if (int e = exec_outcome(status_r, root)) {
    ::unlinkat(dirfd, sup::kMonitorFile, 0);  // nothing ran: no record of a start
    fail(e, exec_error(args, e));
  }
  if (m.timeout_tfd >= 0) {
    struct itimerspec its = ms_to_its(args.timeout_ms);
    ::timerfd_settime(m.timeout_tfd, 0, &its, nullptr);
  }
  m.root = root;
  m.info = info;
  m.timeout_ms = args.timeout_ms;
  m.restart = args.restart;
  if (args.restart != sup::RestartPolicy::no) {
    m.restart_delay_ms = args.restart_delay_ms;
    m.max_restarts = args.max_restarts;
    m.restart_tfd = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (m.restart_tfd < 0) diag("timerfd_create: %s: no restarts", ::strerror(errno));
    m.spawn = [&args, &m, &child_start, &cwd, devnull, dirfd](pid_t* pid, std::string* why,
                                                             const std::function<void(pid_t)>& publish) {
      *pid = -1;
      if (!m.cg.empty() && !m.cg.exists()) {
        *why = errmsg(("cannot open the cgroup " + m.cg.path()).c_str(), ENOENT);
        return ENOENT;
      }
      // Said in words here; the child's chdir would only give an errno.
      struct stat st {};
      int e = 0;
      if (!cwd.empty() && ::stat(cwd.c_str(), &st) != 0) e = errno;
      else if (!cwd.empty() && !S_ISDIR(st.st_mode)) e = ENOTDIR;
      if (e != 0) {
        *why = errmsg(("cannot change to '" + cwd + "'").c_str(), e);
        return e;
      }
      // The run waits at a gate of its own until it is published.
      int gate[2] = {-1, -1};
      if (::pipe2(gate, O_CLOEXEC) != 0) {
        e = errno;
        *why = errmsg("pipe", e);
        return e;
      }
      // Each run reads the same input, from a read end of its own.
      const int in = args.stdin_pipe ? open_stdin_for_run(dirfd) : -1;
      int status = -1;
      *pid = fork_run(args, m, child_start, false, gate[0], gate[1], in >= 0 ? in : devnull,
                      cwd.empty() ? nullptr : cwd.c_str(), &status);
      e = errno;
      if (in >= 0) ::close(in);
      ::close(gate[0]);
      if (*pid < 0) {
        ::close(gate[1]);
        *why = errmsg("cannot fork", e);
        return e;
      }
      publish(*pid);
      ssize_t n;
      do {
        n = ::write(gate[1], "g", 1);
      } while (n < 0 && errno == EINTR);
      ::close(gate[1]);  // unwritten: EOF, the run does not exec (ECANCELED)
      e = exec_outcome(status, *pid);
      if (e != 0) *why = exec_error(args, e);
      return e;
    };
  }

  report(std::string(sup::kReportOk) + " " + std::to_string(root));
  ::dup2(devnull, 1);  // the launcher's read now sees EOF
  // After the report, off the start's path (a file created is 15-200 us on
  // ext4, bench/RESULTS.md): the log, so that output at the end (a last
  // line, then exit) does not pay for it.
  (void)relay.open_log();  // else tried again at the first output
  if (::chdir("/") != 0) {
    // Only to not pin the command's cwd; harmless if it fails.
  }

  return run_loop(m);
}

int main(int argc, char** argv) {
  ensure_std_fds();
  sbxmon::reset_ignored_signals();
  if (argc == 2 && ::strcmp(argv[1], "--serve") == 0) return serve();
  return run_monitor(argc, argv, true);
}
