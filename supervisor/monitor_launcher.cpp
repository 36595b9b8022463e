#include "supervisor/monitor_launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <sstream>

#include "supervisor/unique_fd.hpp"

namespace sup {

namespace {

std::string ms(double sec) { return std::to_string(static_cast<long long>(std::llround(sec * 1000))); }

// The monitor's one-line report: "ok PID" or "err ERRNO MESSAGE".
std::string read_report(int fd) {
  std::string line;
  char buf[512];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    // A monitor that neither reports nor exits within a minute is broken.
    int r = ::poll(&p, 1, 60000);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
    if (auto nl = line.find('\n'); nl != std::string::npos) return line.substr(0, nl);
  }
  return line;
}

}  // namespace

// posix_spawn rather than Boost.Process: Boost 1.74's bp::environment reads
// past the end of shorter entries (AddressSanitizer: heap-buffer-overflow in
// basic_environment_impl::find) and its limit_handles closes the report
// pipe. posix_spawn is also the cheapest way to start a process from a big
// multithreaded daemon (vfork semantics, no page-table copy).
Result<pid_t> launch_monitor(const MonitorLaunch& l) {
  std::vector<std::string> args = {l.monitor_path, "--dir", l.record_dir, "--grace-ms", ms(l.grace_sec)};
  if (l.timeout_sec > 0) {
    args.push_back("--timeout-ms");
    args.push_back(ms(std::max(l.timeout_sec, 0.001)));
  }
  if (l.log_max > 0) args.insert(args.end(), {"--log-max", std::to_string(l.log_max)});
  if (l.run_as) {
    args.insert(args.end(), {"--uid", std::to_string(l.run_as->uid), "--gid", std::to_string(l.run_as->gid)});
    std::string groups;
    for (gid_t g : l.run_as->groups) groups += (groups.empty() ? "" : ",") + std::to_string(g);
    if (!groups.empty()) args.insert(args.end(), {"--groups", groups});
  }
  args.push_back("--");
  args.insert(args.end(), l.argv.begin(), l.argv.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_strings;
  env_strings.reserve(l.env.size());
  for (const auto& [k, v] : l.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return error_from_errno(errno, "pipe");
  UniqueFd report_r(fds[0]), report_w(fds[1]);

  // Every fd of ours is CLOEXEC, and the monitor closes all fds >= 3 as its
  // first act anyway, so nothing of the daemon reaches the command.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, report_w.get(), 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addchdir_np(&fa, l.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, l.monitor_path.c_str(), &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    if (rc == E2BIG) return Error{Errc::too_big, "the arguments and environment are too large to run (E2BIG)"};
    return error_from_errno(rc, "cannot run the monitor " + l.monitor_path);
  }
  report_w.reset();
  std::string line = read_report(report_r.get());
  // The first monitor process exits as soon as it has forked the real one.
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  std::istringstream in(line);
  std::string word;
  in >> word;
  if (word == "ok") {
    long cmd_pid = 0;
    in >> cmd_pid;
    if (cmd_pid > 0) return static_cast<pid_t>(cmd_pid);
  } else if (word == "err") {
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

}  // namespace sup
