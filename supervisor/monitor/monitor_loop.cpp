// sbxfs-monitor: the event loop (one thread, poll(), idle = blocked in poll).
//
// Sources: the signalfd (SIGCHLD, SIGTERM/SIGINT/SIGHUP), the command's
// stdout and stderr pipes (moved into the logs by relay.cpp), the ctl FIFO, the timeout timerfd and the kill
// timerfd (grace, then repeated SIGKILL sweeps). The record ends when
// waitpid(-1) reports ECHILD: the monitor is a subreaper, so that means the
// command and every process it started are gone; with a cgroup, also when
// its cgroup.events says `populated 0` (POLLPRI on it), so that a member
// the monitor never parented counts too. The command's stdin FIFO is no
// source: the command reads it directly, the monitor only holds a write end
// (closed by the ctl request `eof`), so input costs the monitor no wake-up.
// With --notify-fd, the command's notification pipe: its first newline is
// written down as `notified`.
//
// Under a restart policy that end is a run's: the policy may arm the delay
// timerfd (state restarting) and start the next run when it fires; the
// record (exit.json) ends only when the policy is over. The cgroup stays,
// empty, between runs: the monitor is not in it, and each run joins it.
#include "monitor.hpp"

#include "supervisor/clock.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/command_state.hpp"
#include "supervisor/exit_record.hpp"
#include "supervisor/monitor_ctl.hpp"
#include "supervisor/notify_record.hpp"
#include "supervisor/proc_tree.hpp"
#include "supervisor/signal_names.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

namespace sbxmon {

namespace {

constexpr size_t kMaxCtlLine = 4096;
// SIGKILL sweeps: every 100 ms, then every second once this many went by
// (a process stuck in uninterruptible sleep should not cost 10 scans/s forever).
constexpr int kFastSweeps = 50;
// Reads of a stream that keeps having output, the streams in turn, before
// the next poll (which also sees the other requests, and a stream that had
// nothing at its last read): see pump_output().
constexpr int kBurst = 16;
// How long the monitor stays, asleep, once its command's end is written:
// longer than the daemon's answer and its reader's next read take (0.2-0.5
// ms on the 2-vCPU guest), see finish().
constexpr long kLeaveAfterEndNs = 1000000;

class Loop {
 public:
  explicit Loop(Monitor& m) : m_(m) {}
  int run();

 private:
  void pump_output(bool out, bool err);
  // Requests.
  void read_ctl();
  void read_notify();
  void handle_ctl_line(std::string line);
  // Feeds one event through the command's transition table and acts on it.
  void on(sup::CommandEvent e);
  void send_term();
  void kill_sweep(bool first);
  void arm_kill_timer(uint64_t first_ms, uint64_t interval_ms);
  void disarm_timeout();
  void send_signal(int sig);
  void close_input();

  // Children.
  void read_signals(bool* sigchld);
  bool reap();  // true once no child is left (ECHILD)
  // A run's tree is gone: true when the record ends (else the policy armed its delay).
  bool run_over();
  int finish();

  // The restart policy.
  void arm_delay();
  void start_next_run();
  void write_monitor_record();

  // Why the command was asked to end: the first reason wins.
  enum class Cause { none, requested, timeout };
  // How the current run ended (valid once its root was reaped).
  struct Outcome {
    int exit_code = -1;
    int sig = 0;
    bool oom = false;
    const char* reason = "exited";
  };
  Outcome outcome();
  // The current run's process while it is ours to reap: its pid cannot be reused.
  pid_t own_root() const { return root_reaped_ ? 0 : m_.root; }
  void mark_stopping();
  static constexpr uint64_t kMarkAfterMs = 50;
  bool mark_due_ = false;  // the kill timer's next tick makes the stopping mark, then waits out the grace

  Monitor& m_;
  bool notified_ = false;  // `notified` is written
  sup::CommandState state_ = sup::CommandState::running;
  Cause cause_ = Cause::none;
  bool root_reaped_ = false;
  int root_status_ = 0;
  bool sent_sigkill_ = false;  // by a stop or a `signal 9`: such a SIGKILL is no oom kill
  int sweeps_ = 0;
  bool stop_asked_ = false;  // a stop came (whatever cause_ says): the policy is over
  bool over_ = false;        // the record ends now (a stop during the delay)
  uint64_t restarts_ = 0;
  std::chrono::steady_clock::time_point run_started_ = std::chrono::steady_clock::now();
  sup::RestartBackoff backoff_{std::chrono::milliseconds(m_.restart_delay_ms)};
  std::chrono::milliseconds delay_{0};  // the delay armed
  std::string ctl_buf_;
  bool ctl_skip_ = false;  // dropping an overlong line up to its newline
};

void Loop::read_notify() {
  char buf[512];
  const ssize_t n = ::read(m_.notify, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {  // every writer closed it
    ::close(m_.notify);
    m_.notify = -1;
    return;
  }
  // Later bytes are read and dropped: a command that says it twice is not
  // killed by SIGPIPE.
  if (notified_ || ::memchr(buf, '\n', static_cast<size_t>(n)) == nullptr) return;
  notified_ = true;
  struct timespec ts {};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  const int64_t us = static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  if (int err = sup::write_file_atomic_at(m_.dirfd, sup::kNotifiedFile, sup::format_notified(us)))
    diag("cannot write %s: %s", sup::kNotifiedFile, ::strerror(err));
}

void Loop::read_ctl() {
  char buf[1024];
  for (;;) {
    ssize_t n = ::read(m_.ctlfd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EAGAIN (never EOF: we hold a write end too)
    for (ssize_t i = 0; i < n; ++i) {
      char c = buf[i];
      if (c == '\n') {
        if (!ctl_skip_) handle_ctl_line(ctl_buf_);
        ctl_buf_.clear();
        ctl_skip_ = false;
      } else if (!ctl_skip_) {
        ctl_buf_ += c;
        if (ctl_buf_.size() > kMaxCtlLine) {
          ctl_buf_.clear();
          ctl_skip_ = true;
        }
      }
    }
  }
}

void Loop::handle_ctl_line(std::string line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.pop_back();
  size_t start = line.find_first_not_of(" \t");
  if (start == std::string::npos) return;
  line.erase(0, start);
  if (line == sup::kCtlTerm) {
    on(sup::CommandEvent::stop_asked);
  } else if (line == sup::kCtlKill) {
    on(sup::CommandEvent::kill_asked);
  } else if (line == sup::kCtlEof) {
    close_input();
  } else if (line.rfind(sup::kCtlSignal, 0) == 0) {
    std::string num = line.substr(std::string_view(sup::kCtlSignal).size());
    size_t s = num.find_first_not_of(' ');
    uint64_t sig = 0;
    if (s != std::string::npos && parse_u64(num.c_str() + s, &sig) && sig >= 1 && sig <= 64) {
      send_signal(static_cast<int>(sig));
    } else {
      diag("ctl: bad signal request ignored");
    }
  } else {
    diag("ctl: unknown request ignored");
  }
}

void Loop::send_signal(int sig) {
  // Being stopped: a STOP would hold the tree until the grace's SIGKILL.
  if (sig == SIGSTOP && (state_ == sup::CommandState::stopping || state_ == sup::CommandState::killing)) return;
  if (sig == SIGKILL) sent_sigkill_ = true;
  if (!m_.cg.empty()) {
    // KILL: cgroup.kill ends every member at once, one forking too.
    if (sig == SIGKILL && m_.cg.kill() == 0) return;
    m_.cg.signal_members(sig, false, own_root());
    return;
  }
  signal_tree(m_.root, !root_reaped_, sig, false);
}

void Loop::close_input() {
  if (m_.stdin_w < 0) return;
  // Gone first: a daemon that opens it afterwards learns the input is closed
  // (ENOENT), and a restarted command reads /dev/null.
  ::unlinkat(m_.dirfd, sup::kStdinFile, 0);
  ::close(m_.stdin_w);
  m_.stdin_w = -1;
}

void Loop::arm_kill_timer(uint64_t first_ms, uint64_t interval_ms) {
  struct itimerspec its = {};
  its.it_value.tv_sec = static_cast<time_t>(first_ms / 1000);
  its.it_value.tv_nsec = static_cast<long>((first_ms % 1000) * 1000000);
  if (first_ms == 0) its.it_value.tv_nsec = 1;  // 0 would disarm
  its.it_interval.tv_sec = static_cast<time_t>(interval_ms / 1000);
  its.it_interval.tv_nsec = static_cast<long>((interval_ms % 1000) * 1000000);
  ::timerfd_settime(m_.kill_tfd, 0, &its, nullptr);
}

void Loop::disarm_timeout() {
  if (m_.timeout_tfd < 0) return;  // a stop in progress is not also a timeout
  struct itimerspec off = {};
  ::timerfd_settime(m_.timeout_tfd, 0, &off, nullptr);
}

void Loop::on(sup::CommandEvent e) {
  using sup::CommandEvent;
  if (cause_ == Cause::none && (e == CommandEvent::stop_asked || e == CommandEvent::kill_asked))
    cause_ = Cause::requested;
  if (cause_ == Cause::none && e == CommandEvent::timed_out) cause_ = Cause::timeout;
  if (e == CommandEvent::stop_asked || e == CommandEvent::kill_asked) stop_asked_ = true;
  const sup::Transition t = sup::transition(state_, e);
  const bool was_killing = state_ == sup::CommandState::killing;
  state_ = t.next;
  if (e == CommandEvent::timed_out && t.action == sup::CommandAction::send_term) mark_stopping();
  switch (t.action) {
    case sup::CommandAction::send_term: send_term(); break;
    case sup::CommandAction::send_kill: kill_sweep(!was_killing); break;
    case sup::CommandAction::none:
    case sup::CommandAction::record_end: break;  // finish() writes the end
    case sup::CommandAction::freeze:
    case sup::CommandAction::thaw: break;        // the supervisor's (signal requests pass through)
    case sup::CommandAction::arm_delay: arm_delay(); break;
    case sup::CommandAction::spawn: start_next_run(); break;
    case sup::CommandAction::end_policy: over_ = true; break;  // nothing runs: the record ends at once
    case sup::CommandAction::launch: break;      // the supervisor's (a queued command has no monitor)
  }
}

void Loop::mark_stopping() {
  const int fd = ::openat(m_.dirfd, sup::kStoppingFile, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
  else diag("cannot make the stopping mark: the supervisor will show the command running until it ends");
}

void Loop::send_term() {
  disarm_timeout();
  if (!m_.cg.empty()) {
    m_.cg.freeze(false);  // a frozen member would not see its TERM
    m_.cg.signal_members(SIGTERM, true, own_root());
  } else {
    signal_tree(m_.root, !root_reaped_, SIGTERM, true);
  }
  // A stop that outlasts kMarkAfterMs leaves the mark too (a timeout's has
  // it already): a daemon restarted during its grace knows it. Not at once:
  // most trees end at their TERM, and a file made is time on every stop.
  mark_due_ = cause_ != Cause::timeout && m_.grace_ms > kMarkAfterMs;
  arm_kill_timer(mark_due_ ? kMarkAfterMs : m_.grace_ms, 0);
}

void Loop::kill_sweep(bool first) {
  if (first) disarm_timeout();
  mark_due_ = false;  // the kill timer is the sweeps' now
  sent_sigkill_ = true;
  // The cgroup empty and the command not over: a process of it left the
  // cgroup (only root can move one out); it is still a descendant.
  if (m_.cg.empty() || m_.cg.kill() != 0 || !sup::Cgroup::populated(m_.cg_events))
    signal_tree(m_.root, !root_reaped_, SIGKILL, false);
  ++sweeps_;
  if (first) {
    arm_kill_timer(100, 100);
  } else if (sweeps_ == kFastSweeps) {
    arm_kill_timer(1000, 1000);
  }
}

void Loop::read_signals(bool* sigchld) {
  struct signalfd_siginfo si;
  for (;;) {
    ssize_t n = ::read(m_.sigfd, &si, sizeof si);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof si)) return;
    if (si.ssi_signo == SIGCHLD) {
      *sigchld = true;
    } else {
      // SIGTERM / SIGINT / SIGHUP to the monitor: same as a `term` request.
      on(sup::CommandEvent::stop_asked);
    }
  }
}

bool Loop::reap() {
  for (;;) {
    int st = 0;
    pid_t p = ::waitpid(-1, &st, WNOHANG | __WALL);
    if (p > 0) {
      if (p == m_.root) {
        root_reaped_ = true;
        root_status_ = st;
      }
      continue;
    }
    if (p == 0) return false;
    if (errno == EINTR) continue;
    if (errno == ECHILD) return true;
    diag("waitpid: %s", ::strerror(errno));
    return false;
  }
}

Loop::Outcome Loop::outcome() {
  Outcome o;
  if (root_reaped_ && WIFEXITED(root_status_)) o.exit_code = WEXITSTATUS(root_status_);
  if (root_reaped_ && WIFSIGNALED(root_status_)) o.sig = WTERMSIG(root_status_);
  // Only a SIGKILL nobody asked for can be the OOM killer's (so memory.events
  // is not read on the way of every end).
  const bool unasked_kill = o.sig == SIGKILL && !sent_sigkill_;
  std::optional<std::uint64_t> cg_ooms = m_.cg.empty() || !unasked_kill ? std::nullopt : m_.cg.oom_kills();
  if (cg_ooms) {
    // The kernel's count for this command (every run's: a restart after an oom kill counts it again).
    o.oom = *cg_ooms > 0;
  } else if (unasked_kill && m_.oom_at_start >= 0) {
    long long now = sup::read_oom_kill_count();
    o.oom = now > m_.oom_at_start;
  }
  if (!root_reaped_) {
    o.reason = "unknown";  // cannot happen: ECHILD means the root was reaped
  } else if (cause_ == Cause::timeout) {
    o.reason = "timedOut";
  } else if (cause_ == Cause::requested) {
    o.reason = "stopped";
  } else if (o.sig != 0) {
    o.reason = o.oom ? "oomKilled" : "killed";
  }
  return o;
}

bool Loop::run_over() {
  m_.relay->drain();
  if (m_.restart == sup::RestartPolicy::no || m_.restart_tfd < 0) return true;
  const Outcome o = outcome();
  const sup::RunEnd end{o.exit_code, o.sig != 0, stop_asked_};
  if (!sup::restart_wanted(m_.restart, end, restarts_, m_.max_restarts)) return true;
  // The next run gets pipes of its own; what a process outside the tree
  // still writes to these is not this command's any more.
  for (Stream* st : {&m_.out, &m_.err})
    if (st->pipe >= 0) {
      ::close(st->pipe);
      st->pipe = -1;
    }
  const auto lasted =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - run_started_);
  delay_ = backoff_.after_run(lasted);
  char how[96];
  if (o.sig != 0)
    snprintf(how, sizeof how, "%s (%s)", o.reason, sup::signal_name(o.sig).c_str());
  else
    snprintf(how, sizeof how, "%s with code %d", cause_ == Cause::timeout ? "timedOut" : "exited", o.exit_code);
  // The delay in seconds to the millisecond (1234.5, 0.25, 30; the backoff's
  // doubling of restartDelaySec): never an exponent.
  const auto ms = static_cast<unsigned long long>(delay_.count());
  char secs[48];
  snprintf(secs, sizeof secs, "%llu.%03llu", ms / 1000, ms % 1000);
  std::string in = secs;
  while (in.back() == '0') in.pop_back();
  if (in.back() == '.') in.pop_back();
  char line[256];
  const std::string of = m_.max_restarts ? " of " + std::to_string(*m_.max_restarts) : std::string();
  snprintf(line, sizeof line, "[sbxfs: %s; restart %llu%s in %s s]", how,
           static_cast<unsigned long long>(restarts_ + 1), of.c_str(), in.c_str());
  m_.relay->restart_marker(line);
  on(sup::CommandEvent::run_ended);
  return false;
}

void Loop::arm_delay() {
  disarm_timeout();
  // The run's cause is told in its marker; what ends the record during the
  // delay is a stop, whatever ended the run (a timeout, say).
  cause_ = Cause::none;
  struct itimerspec off = {};
  ::timerfd_settime(m_.kill_tfd, 0, &off, nullptr);
  // The next run joins the cgroup: a frozen one would stop it at once.
  if (!m_.cg.empty()) m_.cg.freeze(false);
  struct itimerspec its = {};
  const auto ms = static_cast<uint64_t>(delay_.count());
  its.it_value.tv_sec = static_cast<time_t>(ms / 1000);
  its.it_value.tv_nsec = static_cast<long>((ms % 1000) * 1000000);
  if (ms == 0) its.it_value.tv_nsec = 1;  // 0 would disarm
  ::timerfd_settime(m_.restart_tfd, 0, &its, nullptr);
  m_.info.restart_at = sup::iso_of_us((sup::now_ms() + static_cast<int64_t>(ms)) * 1000);
  write_monitor_record();
}

void Loop::start_next_run() {
  ::unlinkat(m_.dirfd, sup::kStoppingFile, 0);  // the last run's stop (a timeout's) is over
  ++restarts_;
  root_reaped_ = false;
  root_status_ = 0;
  sent_sigkill_ = false;
  sweeps_ = 0;
  cause_ = Cause::none;
  m_.oom_at_start = sup::read_oom_kill_count();
  run_started_ = std::chrono::steady_clock::now();
  pid_t pid = -1;
  std::string why;
  m_.info.restarts = restarts_;
  m_.info.restart_at.clear();
  m_.info.started_at = sup::iso_now();
  const int err = m_.spawn(&pid, &why, [this](pid_t run) {
    // Before the run's first instruction: a step it writes at once finds it.
    sup::ProcStat st;
    m_.info.pid = run;
    m_.info.pid_start = sup::read_proc_stat(run, &st) ? st.starttime : 0;
    write_monitor_record();
  });
  if (err != 0) {
    if (pid > 0) {
      m_.info.pid = pid;
      m_.info.pid_start = 0;  // reaped: nothing of it to find
    }
    write_monitor_record();
    // A run that could not start is one that failed: 127, as a shell says
    // of a command it cannot run; the policy goes on (or ends) as after any.
    m_.relay->restart_marker("[sbxfs: restart " + std::to_string(restarts_) + ": " + why + "]");
    root_reaped_ = true;
    root_status_ = 127 << 8;
    if (run_over()) over_ = true;
    return;
  }
  m_.root = pid;
  if (m_.timeout_tfd >= 0 && m_.timeout_ms > 0) {
    struct itimerspec its = {};
    its.it_value.tv_sec = static_cast<time_t>(m_.timeout_ms / 1000);
    its.it_value.tv_nsec = static_cast<long>((m_.timeout_ms % 1000) * 1000000);
    ::timerfd_settime(m_.timeout_tfd, 0, &its, nullptr);
  }
}

void Loop::write_monitor_record() {
  if (int e = sup::write_file_atomic_at(m_.dirfd, sup::kMonitorFile, sup::format_monitor(m_.info)))
    diag("cannot write monitor.json: %s", ::strerror(e));
}

int Loop::finish() {
  on(sup::CommandEvent::ended);
  m_.relay->drain();
  const Outcome o = outcome();
  sup::ExitInfo e;
  e.exit_code = o.exit_code;
  if (o.sig != 0) e.signal = sup::signal_name(o.sig);
  e.end_reason = o.reason;
  e.timed_out = cause_ == Cause::timeout;
  e.finished_at = sup::iso_now();
  e.oom = o.oom;
  e.output_lost = m_.relay->log_lost();
  int rc = 0;
  if (int err = sup::write_file_atomic_at(m_.dirfd, sup::kExitFile, sup::format_exit(e))) {
    diag("cannot write exit.json: %s", ::strerror(err));
    rc = 1;
  }
  // The end is out, and the daemon thread it woke is queued, often on this
  // CPU (on a guest whose CPUs share no cache, always the waker's). What is
  // left here, the cgroup's removal and this process's exit (0.7-0.9 ms of
  // tearing down its memory in a trace), waits a moment, so that that
  // thread and then the reader it answers run first. A sched_yield() was
  // not enough (the scheduler let the monitor go on in half of the ends of
  // a trace), and moving to another CPU took the daemon's when its thread
  // was queued there (bench/RESULTS.md).
  const struct timespec moment = {0, kLeaveAfterEndNs};
  ::nanosleep(&moment, nullptr);
  // Empty now; removed after the end is written, not before: the rmdir and
  // the kernel work it sets off cost about 0.1 ms that every waiter would
  // wait. The daemon removes one left here once this monitor is gone.
  if (!m_.cg.empty())
    if (int err = m_.cg.remove()) diag("cannot remove cgroup %s: %s", m_.cg.path().c_str(), ::strerror(err));
  // ctl stays: with no reader, a writer's non-blocking open gets ENXIO. An
  // unlink would cost later starts: ext4 without a journal skips inodes
  // freed in the last 30 s on every allocation (find_inode_bit), and that
  // scan was most of a start's time (bench/RESULTS.md).
  return rc;
}

void Loop::pump_output(bool out, bool err) {
  // A stream that had output is read again at once, while it has more: a
  // relay that polled before every read let the writer's pipe fill further,
  // and the writer then copied into fresh pipe pages rather than the one
  // just read: 7 % more CPU for a writer at full speed (bench/RESULTS.md,
  // "Capture: the writer sets the pace"). In turn, so that neither stream
  // waits for the other's burst; bounded, so a stream that never stops
  // does not keep stops and signals waiting.
  for (int round = 0; round < kBurst && (out || err); ++round) {
    if (out) out = m_.relay->pump(m_.out) == Relay::Result::moved;
    if (err) err = m_.relay->pump(m_.err) == Relay::Result::moved;
  }
}

int Loop::run() {
  enum { kSig, kOut, kErr, kCtl, kTimeout, kKill, kCg, kRestart, kNotify, kCount };
  // Every child reaped, and (with a cgroup) no member left; between runs
  // there is no run to end.
  auto ended = [this] {
    return state_ != sup::CommandState::restarting && reap() &&
           (m_.cg_events < 0 || !sup::Cgroup::populated(m_.cg_events));
  };
  // Stopped, the command's first process reaped, the cgroup empty, and
  // children still there: they were moved out of the cgroup (only root
  // can), and get SIGKILL now, not once the grace is over. (Before the
  // first process is reaped, an empty cgroup may be its exit under way.)
  auto left_the_cgroup = [this] {
    return state_ == sup::CommandState::stopping && root_reaped_ && m_.cg_events >= 0 &&
           !sup::Cgroup::populated(m_.cg_events);
  };
  // A SIGCHLD may have been consumed before the loop; check once up front.
  if (ended() && run_over()) return finish();
  for (;;) {
    if (over_) return finish();
    struct pollfd pfds[kCount];
    int fds[kCount] = {m_.sigfd,    m_.out.pipe, m_.err.pipe, m_.ctlfd,  m_.timeout_tfd,
                       m_.kill_tfd, m_.cg_events, m_.restart_tfd, m_.notify};
    for (int i = 0; i < kCount; ++i) {
      pfds[i].fd = fds[i];  // negative: ignored by poll
      pfds[i].events = i == kCg ? POLLPRI : POLLIN;
      pfds[i].revents = 0;
    }
    int r = ::poll(pfds, kCount, -1);
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ENOMEM) continue;
      diag("poll: %s", ::strerror(errno));
      return 1;
    }
    auto ready = [&](int i) { return pfds[i].fd >= 0 && pfds[i].revents != 0; };
    // Output first, so what was written before an exit is in the log first.
    pump_output(ready(kOut), ready(kErr));
    if (ready(kCtl)) read_ctl();
    if (ready(kNotify)) read_notify();
    if (ready(kTimeout)) {
      uint64_t ticks;
      if (::read(m_.timeout_tfd, &ticks, sizeof ticks) == sizeof ticks) on(sup::CommandEvent::timed_out);
    }
    if (ready(kKill)) {
      uint64_t ticks;
      if (::read(m_.kill_tfd, &ticks, sizeof ticks) == sizeof ticks) {
        if (mark_due_) {
          mark_due_ = false;
          mark_stopping();
          arm_kill_timer(m_.grace_ms - kMarkAfterMs, 0);
        } else {
          on(sup::CommandEvent::grace_over);
        }
      }
    }
    if (ready(kRestart)) {
      uint64_t ticks;
      if (::read(m_.restart_tfd, &ticks, sizeof ticks) == sizeof ticks) on(sup::CommandEvent::delay_over);
    }
    if (ready(kSig)) {
      bool sigchld = false;
      read_signals(&sigchld);
      if (sigchld && ended() && run_over()) return finish();
      if (sigchld && left_the_cgroup()) on(sup::CommandEvent::grace_over);
    }
    if (ready(kCg)) {  // populated changed; the read re-arms the event
      const bool members = sup::Cgroup::populated(m_.cg_events);
      if (!members && state_ != sup::CommandState::restarting) {
        if (reap()) {
          if (run_over()) return finish();
        } else if (left_the_cgroup()) {
          on(sup::CommandEvent::grace_over);
        }
      }
    }
  }
}

}  // namespace

int run_loop(Monitor& m) {
  Loop loop(m);
  return loop.run();
}

}  // namespace sbxmon
