#include "fsd/daemon.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <pthread.h>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fuse_lowlevel.h>

#include "fsd/dispatcher.hpp"
#include "fsd/filesystem.hpp"
#include "fsd/mount_beneath.hpp"
#include "fsd/mount_point_lock.hpp"
#include "fsd/mount_watch.hpp"
#include "fsd/stale_mount.hpp"
#include "supervisor/own_mount.hpp"
#include "supervisor/state_dir_place.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

namespace {

/// How long a start waits for another daemon at the same mount point to
/// mount (between its lock and its mount, nothing slow).
constexpr std::chrono::seconds kMountLockWait{10};

/// Why the mount point and the state directory cannot go together: the one
/// in the other (the daemon would reach its own records through its own
/// mount, or hide them under it). Symbolic links in their folders are
/// resolved; the last names are not looked at (a mount point may be a stale
/// or a hung mount).
std::optional<std::string> overlap(const std::string& mountpoint, const std::string& state_dir) {
  auto in = [](const std::string& a, const std::string& b) {
    return a == b || a.starts_with(b.ends_with('/') ? b : b + "/");
  };
  auto resolved = [](const std::string& p) {
    const std::filesystem::path path(p);
    if (!path.has_parent_path() || path == path.root_path()) return p;
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::weakly_canonical(path.parent_path(), ec);
    return ec ? p : (parent / path.filename()).string();
  };
  const std::pair<std::string, std::string> forms[] = {{mountpoint, state_dir},
                                                       {resolved(mountpoint), resolved(state_dir)}};
  for (const auto& [m, st] : forms) {
    if (in(st, m))
      return "the state directory " + state_dir + " is the mount point " + mountpoint +
             " or inside it: give one outside it";
    if (in(m, st)) return "the mount point " + mountpoint + " is inside the state directory " + state_dir;
  }
  return std::nullopt;
}

// ---- logging: every line timestamped; libfuse's last error kept for the launcher.

std::mutex g_log_mu;
bool g_at_line_start = true;  // guarded by g_log_mu: libfuse logs one line in several calls
std::string g_error_line;     // guarded by g_log_mu: the error line being logged
std::string g_last_error;     // guarded by g_log_mu
// In the background, the log file: past g_log_max bytes it is renamed
// sbxfs.log.1 and begun anew, so that no writer (a refused request is a
// line, and costs its writer nothing) can fill the disk through it.
std::string g_log_path;        // guarded by g_log_mu; empty: standard error is not ours
std::uint64_t g_log_max = 0;   // guarded by g_log_mu
std::uint64_t g_log_size = 0;  // guarded by g_log_mu

void rotate_log() {  // needs g_log_mu
  if (::rename(g_log_path.c_str(), (g_log_path + ".1").c_str()) != 0) return;
  const int fresh = ::open(g_log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fresh < 0) return;  // writes go on into sbxfs.log.1
  std::fflush(stdout);
  std::fflush(stderr);
  (void)::dup2(fresh, 1);
  (void)::dup2(fresh, 2);
  ::close(fresh);
  g_log_size = 0;
}

void log_line(fuse_log_level level, const char* fmt, va_list ap) {
  char msg[2048];
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  const std::size_t len = std::strlen(msg);
  std::lock_guard g(g_log_mu);
  if (g_at_line_start) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    std::tm tm{};
    gmtime_r(&now.tv_sec, &tm);
    char when[32];
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!g_log_path.empty() && g_log_size >= g_log_max) rotate_log();
    g_log_size += sizeof "2026-12-06T17:19:28.000Z " - 1;
    std::fprintf(stderr, "%s.%03ldZ ", when, now.tv_nsec / 1000000);
    g_error_line.clear();
  }
  g_log_size += len;
  std::fputs(msg, stderr);
  std::fflush(stderr);
  g_at_line_start = len > 0 && msg[len - 1] == '\n';
  if (level <= FUSE_LOG_ERR) {
    g_error_line += msg;
    if (g_at_line_start) {
      g_last_error = g_error_line;
      while (!g_last_error.empty() && g_last_error.back() == '\n') g_last_error.pop_back();
    }
  }
}

/// Before the session exists libfuse speaks only of the command line, to the
/// terminal: its lines read like sbxfs's own errors there.
void command_line_error(fuse_log_level, const char* fmt, va_list ap) {
  std::lock_guard g(g_log_mu);
  if (g_at_line_start) std::fputs("sbxfs: ", stderr);
  char msg[2048];
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  const std::size_t len = std::strlen(msg);
  std::fputs(msg, stderr);
  g_at_line_start = len > 0 && msg[len - 1] == '\n';
}

std::string last_fuse_error() {
  std::lock_guard g(g_log_mu);
  return g_last_error;
}

// ---- the launcher: in the background the parent waits for "mounted" or an error.

class Launcher {
 public:
  /// In the background: forks. The parent waits for the child's word and
  /// exits; the child returns here, in a new session.
  explicit Launcher(bool foreground) {
    if (foreground) return;
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      std::perror("sbxfs: pipe");
      std::exit(1);
    }
    parent_ = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("sbxfs: fork");
      std::exit(1);
    }
    if (pid > 0) {
      ::close(p[1]);
      std::exit(wait_for_child(p[0], pid));
    }
    ::close(p[0]);
    fd_ = p[1];
    background_ = true;
    ::setsid();
  }

  bool background() const { return background_; }
  /// The process waiting for our word (background), which shares our cgroup.
  pid_t parent() const { return parent_; }

  /// Reports a failed start (the caller then returns 1): the waiting parent
  /// prints it; logged too once the log is a file (before, this child's
  /// stderr is the parent's, which would print it twice).
  void fail(const std::string& msg) {
    if (!background_ || logs_to_file_) fuse_log(FUSE_LOG_ERR, "sbxfs: %s\n", msg.c_str());
    send("error: " + msg);
  }

  /// Standard output and error now go to STATE/sbxfs.log.
  void logging_to_file() { logs_to_file_ = true; }

  void ready() { send("ok"); }

 private:
  static int wait_for_child(int fd, pid_t pid) {
    std::string word;
    char buf[512];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      word.append(buf, static_cast<std::size_t>(n));
    }
    if (word == "ok") return 0;
    if (word.rfind("error: ", 0) == 0) {
      std::fprintf(stderr, "sbxfs: %s\n", word.c_str() + 7);
    } else {
      std::fprintf(stderr, "sbxfs: the daemon died while starting (see sbxfs.log in the state directory)\n");
    }
    // Let it finish going away (it still holds STATE/lock), so a retry right
    // after us does not find the state directory in use.
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return 1;
  }

  void send(const std::string& word) {
    if (fd_ < 0) return;
    (void)!::write(fd_, word.data(), word.size());
    ::close(fd_);
    fd_ = -1;
  }

  int fd_ = -1;  // the pipe to the waiting parent, until we sent our word
  bool background_ = false;
  pid_t parent_ = 0;
  bool logs_to_file_ = false;
};

// ---- ending the FUSE loop from another thread (the mount left the table).

void on_wake(int) {}  // only interrupts the loop's sem_wait

/// fuse_session_loop_mt's calling thread sleeps in sem_wait until a worker
/// ends or a signal arrives; fuse_session_exit alone wakes nobody. So the
/// loop is told to exit, then that thread gets SIGUSR1 (installed without
/// SA_RESTART: sem_wait returns EINTR). A signal landing just before its
/// sem_wait would be lost, so it is repeated until the loop has returned.
/// SIGUSR1 is blocked in every other thread the daemon starts.
class LoopStopper {
 public:
  /// On the thread that will run the loop, before any other thread starts.
  explicit LoopStopper(fuse_session* se) : se_(se), loop_thread_(::pthread_self()) {
    struct sigaction sa {};
    sa.sa_handler = on_wake;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
    sigset_t usr1;
    ::sigemptyset(&usr1);
    ::sigaddset(&usr1, SIGUSR1);
    ::pthread_sigmask(SIG_BLOCK, &usr1, nullptr);  // inherited by the threads started from here
  }
  /// Right before the loop (its workers may take SIGUSR1: their reads retry on EINTR).
  void arm() {
    sigset_t usr1;
    ::sigemptyset(&usr1);
    ::sigaddset(&usr1, SIGUSR1);
    ::pthread_sigmask(SIG_UNBLOCK, &usr1, nullptr);
  }
  /// Any thread: ends the loop; returns once it has returned.
  void stop() {
    fuse_session_exit(se_);
    std::unique_lock g(mu_);
    while (!returned_) {
      ::pthread_kill(loop_thread_, SIGUSR1);
      cv_.wait_for(g, std::chrono::milliseconds(100));
    }
  }
  /// On the loop's thread once the loop has returned.
  void returned() {
    {
      std::lock_guard g(mu_);
      returned_ = true;
    }
    cv_.notify_all();
  }

 private:
  fuse_session* const se_;
  const pthread_t loop_thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool returned_ = false;  // guarded by mu_
};

/// In the background: stdin from /dev/null, stdout and stderr to STATE/sbxfs.log.
sup::Status redirect_stdio(const std::string& dir, std::uint64_t max_bytes) {
  const std::string path = dir + "/sbxfs.log";
  const int log = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) return sup::error_from_errno(errno, "cannot open " + path);
  struct stat st {};
  {
    std::lock_guard g(g_log_mu);
    g_log_path = path;
    g_log_max = max_bytes;
    g_log_size = ::fstat(log, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
  }
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0) return sup::error_from_errno(errno, "cannot open /dev/null");
  if (::dup2(null, 0) < 0 || ::dup2(log, 1) < 0 || ::dup2(log, 2) < 0)
    return sup::error_from_errno(errno, "cannot redirect stdio");
  ::close(null);
  ::close(log);
  return sup::Ok{};
}

}  // namespace

// libfuse frees its copy of the mount point's name only in
// fuse_session_unmount, which a detached mount must skip (see run()).
extern "C" const char* __lsan_default_suppressions() { return "leak:fuse_session_mount\n"; }
extern "C" const char* __lsan_default_options() { return "print_suppressions=0"; }

int run(Options& opts) {
  // Its symbolic links resolved (readlink alone: a mount there is not
  // asked), so that the mount table, which names the place the kernel
  // mounts on, is looked up by that name: a live sbxfs there is found,
  // and a lazy unmount of it noticed.
  const std::string given = absolute_path(opts.mountpoint);
  const std::string mountpoint = sup::OwnMount::resolve_outside(given, {}).value_or(given);
  const std::string state_dir = absolute_path(opts.state_dir);
  if (const std::optional<std::string> why = overlap(mountpoint, state_dir)) {
    std::fprintf(stderr, "sbxfs: %s\n", why->c_str());
    return 1;
  }

  std::vector<std::string> secrets;
  if (!opts.secrets_file.empty()) {
    sup::Result<std::vector<std::string>> s = load_secrets(opts.secrets_file);
    if (!s) {
      std::fprintf(stderr, "sbxfs: %s\n", s.error().message.c_str());
      return 1;
    }
    secrets = std::move(s.value());
  }

  // The session now, before forking: a bad -o option is reported here, on the
  // terminal. Its userdata is where the Filesystem will be once it exists.
  Filesystem* fs_slot = nullptr;
  fuse_set_log_func(command_line_error);
  fuse_session* se = fuse_session_new(&opts.fuse, &lowlevel_ops(), sizeof(fuse_lowlevel_ops), &fs_slot);
  fuse_opt_free_args(&opts.fuse);
  if (!se) return 1;  // libfuse said why
  fuse_set_log_func(log_line);

  // Fork before any thread exists: the supervisor's event loop starts below.
  Launcher launcher(opts.foreground);
  auto fail = [&](const std::string& msg) {
    launcher.fail(msg);
    fuse_session_destroy(se);
    return 1;
  };

  // A live sbxfs at the mount point refuses this start before anything of
  // it exists: no state directory is made, no record taken back. A stale
  // one stays until the new mount is made (below).
  if (const sup::Status s = refuse_live_mount(mountpoint); !s) return fail(s.error().message);
  // Before anything is made in it (the supervisor's load comes later).
  if (const std::string why = sup::state_dir_misplaced(state_dir); !why.empty()) return fail(why + ": choose another");
  std::error_code ec;
  // 0700 from its making: a start that fails after this leaves it private.
  if (std::filesystem::create_directories(state_dir, ec))
    std::filesystem::permissions(state_dir, std::filesystem::perms::owner_all, ec);
  if (ec) return fail("cannot create state directory " + state_dir + ": " + ec.message());
  if (launcher.background()) {
    if (const sup::Status s = redirect_stdio(state_dir, opts.daemon_log_max); !s) return fail(s.error().message);
    launcher.logging_to_file();
  }
  fuse_log(FUSE_LOG_NOTICE, "sbxfs %s starting: pid %d, mount point %s, state %s\n", SBX_VERSION,
           static_cast<int>(::getpid()), mountpoint.c_str(), state_dir.c_str());

  LoopStopper stopper(se);  // before the supervisor's threads start

  // Opening takes STATE/lock (one daemon per state directory) and takes back
  // every command recorded there; its event thread starts here, after the fork.
  sup::SupervisorOptions sopts;
  sopts.state_dir = state_dir;
  sopts.own_mount = mountpoint;
  sopts.secrets = std::move(secrets);
  sopts.retention.keep = opts.keep_ended;
  sopts.retention.max_age = std::chrono::seconds(opts.keep_ended_sec);
  sopts.max_running = opts.max_running;
  sopts.max_running_per_user = opts.max_running_per_user;
  sopts.log_max = opts.log_max;
  sopts.start_timeout = std::chrono::seconds(opts.start_timeout_sec);
  sopts.cgroup = opts.cgroup;
  // A delegated cgroup enables its controllers only once no process is left
  // in it: the parent waiting for the mount goes to the leaf with us.
  // (Still ours: killed meanwhile, its pid could be another process's.)
  if (launcher.background() && ::getppid() == launcher.parent()) sopts.cgroup_companions.push_back(launcher.parent());
  sup::Result<std::unique_ptr<sup::Supervisor>> opened = sup::Supervisor::open(std::move(sopts));
  if (!opened) return fail(opened.error().message);
  std::unique_ptr<sup::Supervisor> supervisor = std::move(opened.value());
  for (const auto& [id, err] : supervisor->load_errors()) {
    const std::optional<sup::CommandStatus> st = supervisor->status(id, sup::CpuFigure::skip);
    fuse_log(FUSE_LOG_WARNING, "sbxfs: record %s cannot be read: %s (%s)\n", id.c_str(), err.message.c_str(),
             st && st->running ? "its command runs on, supervised" : "shown as state error");
  }

  Config cfg;
  cfg.mountpoint = mountpoint;
  cfg.wait_timeout = std::chrono::seconds(opts.wait_timeout_sec);
  cfg.max_request = opts.max_request;
  cfg.output_max = opts.output_max;
  cfg.log_max = opts.log_max;
  cfg.allow_other = opts.allow_other;
  cfg.scratch_ttl = std::chrono::milliseconds(opts.scratch_ttl_ms);
  cfg.keep_steps = std::chrono::seconds(opts.keep_steps_sec);
  auto fs = std::make_unique<Filesystem>(*supervisor, std::move(cfg));
  fs_slot = fs.get();

  // A stale mount stays until the new mount is made: the bare folder below
  // would answer meanwhile (and take a request as a file of its own). The
  // mount point's lock, held until the mount is made, lets one of two
  // daemons started there at the same moment mount; the other then finds
  // the live sbxfs.
  if (!stale_at(mountpoint)) {
    std::filesystem::create_directories(mountpoint, ec);
    if (ec) return fail("cannot create mount point " + mountpoint + ": " + ec.message());
  }
  sup::Result<MountPointLock> mount_lock = MountPointLock::take(mountpoint, kMountLockWait);
  if (!mount_lock) return fail(mount_lock.error().message);
  if (const sup::Status s = refuse_live_mount(mountpoint); !s) return fail(s.error().message);

  // SIGINT and SIGTERM always unmount: a shell starts `sbxfs -f &` with
  // SIGINT ignored, and libfuse only takes over signals left at default.
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (fuse_set_signal_handlers(se) != 0) return fail("cannot set signal handlers");
  // Root slides the new mount beneath a stale one, then detaches that: not
  // a moment of bare folder (mount_beneath.hpp). Else the stale mount is
  // detached just before the mount (a moment of bare folder: the detach and
  // the mount, milliseconds through fusermount3).
  const std::string staging = state_dir + "/mounting";
  bool moved = false;
  if (::geteuid() == 0 && stale_at(mountpoint)) {
    const sup::Result<bool> beneath = mount_beneath_stale(se, mountpoint, staging);
    if (!beneath) {
      fuse_remove_signal_handlers(se);
      return fail("cannot mount " + mountpoint + ": " + beneath.error().message);
    }
    moved = beneath.value();
  }
  if (!moved) {
    if (const sup::Status s = clean_stale_mount(mountpoint); !s) {
      fuse_remove_signal_handlers(se);
      return fail(s.error().message);
    }
    if (fuse_session_mount(se, mountpoint.c_str()) != 0) {
      fuse_remove_signal_handlers(se);
      const std::string why = last_fuse_error();
      return fail("cannot mount " + mountpoint + (why.empty() ? "" : ": " + why));
    }
  }
  mount_lock->release();
  fuse_log(FUSE_LOG_NOTICE, "sbxfs: mounted at %s\n", mountpoint.c_str());
  launcher.ready();
  fs->invalidator().start(se);
  (void)!::chdir("/");  // hold no directory busy

  // Detached by a lazy unmount, the mount is served on, unseen, while any
  // file in it is open: exit, so that a new daemon can take the state
  // directory (mount_watch.hpp).
  std::atomic<bool> detached{false};
  sup::Result<std::unique_ptr<MountWatch>> watch = MountWatch::start(mountpoint, [&] {
    detached = true;
    // A plain unmount ends the connection too, and may be seen here first.
    fuse_log(FUSE_LOG_NOTICE, "sbxfs: %s left the mount table (unmounted); exiting\n", mountpoint.c_str());
    stopper.stop();
  });
  if (!watch)
    fuse_log(FUSE_LOG_WARNING, "sbxfs: %s; a lazy unmount will go unnoticed\n", watch.error().message.c_str());

  fuse_loop_config* loop = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(loop, opts.max_threads);
  if (opts.max_idle_threads != static_cast<unsigned>(-1))  // -1: never reap idle threads (the default)
    fuse_loop_cfg_set_idle_threads(loop, opts.max_idle_threads);
  fuse_loop_cfg_set_clone_fd(loop, opts.clone_fd ? 1 : 0);
  stopper.arm();
  const int rc = fuse_session_loop_mt(se, loop);  // > 0: the signal that ended it
  fuse_loop_cfg_destroy(loop);
  stopper.returned();
  // Gone from the table (detached, or unmounted from outside): unmounting by
  // path now could take down a new daemon's mount there.
  const bool gone = detached || (watch && !(*watch)->mounted());
  if (watch) watch->reset();

  fuse_remove_signal_handlers(se);
  // Answer what is still parked while the session exists, then stop the
  // event thread before anything it could call into goes away.
  fs->shutdown();
  supervisor.reset();
  fs.reset();
  if (!gone && moved) unmount_moved(mountpoint);
  else if (!gone) fuse_session_unmount(se);
  fuse_session_destroy(se);  // closes /dev/fuse: who still holds a file of a detached mount gets ENOTCONN
  fuse_log(FUSE_LOG_NOTICE, "sbxfs: unmounted %s (%s)\n", mountpoint.c_str(),
           detached ? "it left the mount table" : rc < 0 ? std::strerror(-rc) : rc > 0 ? strsignal(rc) : "unmounted");
  return rc < 0 ? 1 : 0;
}

}  // namespace fsd
