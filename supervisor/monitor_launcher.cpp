#include "supervisor/monitor_launcher.hpp"

#include "supervisor/monitor_job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

namespace sup {

namespace {

std::string ms(double sec) { return std::to_string(static_cast<long long>(std::llround(sec * 1000))); }

// The monitor's command-line arguments for a launch (without argv[0]).
std::vector<std::string> monitor_args(const MonitorLaunch& l) {
  std::vector<std::string> args = {"--dir", l.record_dir, "--grace-ms", ms(l.grace_sec)};
  if (l.timeout_sec > 0) {
    args.push_back("--timeout-ms");
    args.push_back(ms(std::max(l.timeout_sec, 0.001)));
  }
  if (l.log_max > 0) args.insert(args.end(), {"--log-max", std::to_string(l.log_max)});
  if (l.run_as) {
    args.insert(args.end(), {"--uid", std::to_string(l.run_as->uid), "--gid", std::to_string(l.run_as->gid)});
    std::string groups;
    for (gid_t g : l.run_as->groups) {
      if (!groups.empty()) groups += ',';
      groups += std::to_string(g);
    }
    if (!groups.empty()) args.insert(args.end(), {"--groups", groups});
  }
  if (!l.cgroup.empty()) args.insert(args.end(), {kJobCgroup, l.cgroup});
  if (l.stdin_pipe) args.insert(args.end(), {kJobStdin, kJobStdinPipe});
  if (l.restart != RestartPolicy::no) {
    args.insert(args.end(), {"--restart", restart_policy_name(l.restart), "--restart-delay-ms",
                             ms(std::max(l.restart_delay_sec, 0.001))});
    if (l.max_restarts) args.insert(args.end(), {"--max-restarts", std::to_string(*l.max_restarts)});
  }
  if (l.notify_fd > 0) args.insert(args.end(), {"--notify-fd", std::to_string(l.notify_fd)});
  if (!l.script.empty()) args.insert(args.end(), {"--script", l.script});
  if (l.simple) args.push_back("--simple");
  if (l.enter_as_user) args.push_back("--enter-as-user");
  args.push_back("--");
  args.insert(args.end(), l.argv.begin(), l.argv.end());
  return args;
}

}  // namespace


MonitorLauncher::MonitorLauncher(std::string monitor_path) : monitor_path_(std::move(monitor_path)) {}

MonitorLauncher::~MonitorLauncher() {
  std::lock_guard g(mu_);
  end_server();
}

void MonitorLauncher::prestart() {
  std::lock_guard g(mu_);
  if (!sock_) (void)start_server();
}

pid_t MonitorLauncher::server_pid() {
  std::lock_guard g(mu_);
  return pid_;
}

// posix_spawn rather than Boost.Process: Boost 1.74's bp::environment reads
// past the end of shorter entries (AddressSanitizer: heap-buffer-overflow in
// basic_environment_impl::find) and its limit_handles would close the
// socket. posix_spawn is also the cheapest way to start a process from a big
// multithreaded daemon (vfork semantics, no page-table copy).
Status MonitorLauncher::start_server() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return error_from_errno(errno, "socketpair for the monitor server");
  UniqueFd ours(sv[0]), theirs(sv[1]);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string arg0 = monitor_path_, arg1 = "--serve";
  char* argv[] = {arg0.data(), arg1.data(), nullptr};
  pid_t pid = 0;
  // The daemon's own environment: the sanitizers' options reach the monitors.
  int rc = ::posix_spawn(&pid, monitor_path_.c_str(), &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return error_from_errno(rc, "cannot run the monitor " + monitor_path_);
  sock_ = std::move(ours);
  pid_ = pid;
  return Ok{};
}

void MonitorLauncher::end_server() {
  if (pid_ <= 0) return;
  sock_.reset();  // EOF: the server returns from recvmsg and exits
  // A server stopped (SIGSTOP) or stuck would hold the daemon's exit for
  // ever: it gets a moment, then SIGKILL. Its monitors live on without it.
  const UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
  pollfd p{pidfd.get(), POLLIN, 0};
  if (!pidfd || ::poll(&p, 1, kServerExitMs) != 1) ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

Status MonitorLauncher::send_job(const int (&fds)[3]) {
  std::lock_guard g(mu_);
  for (int attempt = 0;; ++attempt) {
    if (!sock_)
      if (auto st = start_server(); !st) return st;
    iovec iov{const_cast<char*>(kJobMagic), kJobMagicLen};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t n;
    // Never waits: a stopped or stuck server must not hold the caller.
    do {
      n = ::sendmsg(sock_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n >= 0) return Ok{};
    int e = errno;
    if (e == EAGAIN || e == EWOULDBLOCK)
      return Error{Errc::try_again, "the monitor server (pid " + std::to_string(pid_) +
                                        ") takes no more jobs for now: too many starts are waiting for it"};
    // The server died (killed, or out of memory): start another, once.
    if ((e == EPIPE || e == ECONNRESET || e == ENOTCONN) && attempt == 0) {
      end_server();
      continue;
    }
    return error_from_errno(e, "send a job to the monitor server");
  }
}

PendingLaunch::PendingLaunch(UniqueFd job, std::string job_bytes, UniqueFd report, UniqueFd go)
    : job_(std::move(job)), report_(std::move(report)), go_(std::move(go)), job_bytes_(std::move(job_bytes)) {}

bool PendingLaunch::send_job() {
  while (job_ && sent_ < job_bytes_.size()) {
    const ssize_t n = ::send(job_.get(), job_bytes_.data() + sent_, job_bytes_.size() - sent_,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (n < 0) break;  // the monitor is gone: its report says why
    sent_ += static_cast<std::size_t>(n);
  }
  return true;
}

std::optional<std::string> PendingLaunch::next_line() {
  for (;;) {
    if (auto nl = buf_.find('\n'); nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    if (eof_) return std::exchange(buf_, {});
    char chunk[512];
    const ssize_t n = ::read(report_.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::nullopt;
    if (n <= 0) {
      eof_ = true;
      continue;
    }
    buf_.append(chunk, static_cast<std::size_t>(n));
  }
}

void PendingLaunch::go() {
  // One byte into an empty socket never waits; a gone command shows as the report.
  if (go_) (void)::send(go_.get(), "g", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  go_.reset();
}

void PendingLaunch::cancel() { go_.reset(); }

Result<pid_t> PendingLaunch::parse(const std::string& line, const char* expect) {
  std::istringstream in(line);
  std::string word;
  in >> word;
  if (word == expect) {
    long cmd_pid = 0;
    in >> cmd_pid;
    if (cmd_pid > 0) return static_cast<pid_t>(cmd_pid);
  } else if (word == kReportErr) {
    int err = 0;
    in >> err;
    std::string msg;
    std::getline(in, msg);
    if (!msg.empty() && msg[0] == ' ') msg.erase(0, 1);
    Error e = error_from_errno(err, "exec");
    if (!msg.empty()) e.message = msg;
    return e;
  }
  return Error{Errc::io_error, "the monitor did not report a start (got '" + line + "')"};
}

Result<std::unique_ptr<PendingLaunch>> MonitorLauncher::begin(const MonitorLaunch& l) {
  int js[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, js) != 0) return error_from_errno(errno, "socketpair");
  UniqueFd job_w(js[0]), job_r(js[1]);
  int rp[2];
  if (::pipe2(rp, O_CLOEXEC) != 0) return error_from_errno(errno, "pipe");
  UniqueFd report_r(rp[0]), report_w(rp[1]);
  // Our end only: the monitor's end of the pipe is a file of its own.
  ::fcntl(report_r.get(), F_SETFL, ::fcntl(report_r.get(), F_GETFL) | O_NONBLOCK);
  // The command reads one byte from this before its exec (a socket, so
  // that a write to a gone reader is EPIPE without SIGPIPE).
  int gp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gp) != 0) return error_from_errno(errno, "socketpair");
  UniqueFd go_w(gp[0]), go_r(gp[1]);

  if (auto st = send_job({job_r.get(), report_w.get(), go_r.get()}); !st) return st.error();
  // Only the monitor holds these now: its exit means EOF for us.
  job_r.reset();
  report_w.reset();
  go_r.reset();
  auto p = std::make_unique<PendingLaunch>(std::move(job_w), encode_job(monitor_args(l), l.env, l.cwd), std::move(report_r), std::move(go_w));
  if (p->send_job()) p->end_job();
  return p;
}

Result<pid_t> MonitorLauncher::launch(const MonitorLaunch& l, const Publish& publish,
                                      std::chrono::milliseconds limit) {
  auto begun = begin(l);
  if (!begun) return begun.error();
  PendingLaunch& p = *begun.value();
  auto next = [&]() -> std::string {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (auto line = p.next_line()) return *line;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "";  // a monitor that neither reports nor exits in time is broken
      pollfd fds[2] = {{p.report_fd(), POLLIN, 0}, {p.job_fd(), POLLOUT, 0}};
      if (::poll(fds, p.job_fd() >= 0 ? 2 : 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return "";
      if (p.job_fd() >= 0 && fds[1].revents && p.send_job()) p.end_job();
    }
  };
  auto forked = PendingLaunch::parse(next(), kReportForked);
  if (!forked) return forked.error();
  if (auto st = publish(forked.value()); !st) {
    p.cancel();  // EOF instead of the byte: the command exits without exec
    (void)next();
    return st.error();
  }
  p.go();
  return PendingLaunch::parse(next(), kReportOk);
}

}  // namespace sup
