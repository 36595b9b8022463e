// bench_monitor_floor --dir DIR [--runs N] [--stamp PATH] [--delay-ms MS] [--shell-file F]:
// the least a design like sbxfs's costs, with none of sbxfs's code in it.
//
// Issue 19 asks for a round trip within 2x posix_spawn+waitpid and a
// wake-up within 0.3 ms. This program measures what the design's hops cost
// when each is done the cheapest way, beside the same baselines, in one
// run: a lower bound for any code that keeps the design's invariants
// (a record exists before its command runs; commands outlive the daemon,
// so each runs under a monitor process of its own; the end is on disk
// before anyone is told; clients talk to a daemon in another process).
//
//   client (this process) --socket--> daemon (a small forked process)
//   daemon: renames a folder made ahead into place with the request in
//           it, forks a monitor (no server in between: this daemon is
//           small, so its fork is cheap), or hands the job to one forked
//           ahead (the next is forked once the start is answered)
//   monitor: posix_spawn of the command with stdout to a pipe, reports
//            the start (after the exec) to the daemon, reads the output to
//            its end, reaps the command, writes `exit` (a file renamed
//            into place), reports the end
//   daemon: answers the start with an id; answers `wait` once it has read
//           `exit`
//
// No FUSE, no JSON, no cgroup, no log file, no index, no inotify: the FUSE
// requests (about ten a round trip) and everything else sbxfs does come on
// top of these figures. Output: a line a row, its name and every sample
// in ms; the rows are alternated request by request:
//   floor_rt        write the request, read the id, read the end (/bin/true)
//   floor_rt_spare  the same with a monitor forked ahead of its job
//   spawn_rt        posix_spawn + waitpid of /bin/true
//   floor_wake      the command's last instruction (bench_stamp) -> the end's answer read
//   waitpid_wake    the same command's last instruction -> waitpid returns
//   shell_true      bash -c true (with --shell-file)
//   shell_floor     bash -c '/bin/true & cat F > /dev/null; wait': what the
//                   shell round trip's script must do at least (its command
//                   run, started before `cat` as a start returns after the
//                   exec, and `cat` of the answer), were every answer free
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/spawn_child.hpp"

namespace {

long long now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

[[noreturn]] void die(const char* what) {
  std::perror(what);
  _exit(2);
}

// Client <-> daemon and monitor -> daemon messages: one fixed-size record,
// written whole (SOCK_SEQPACKET, or a pipe write under PIPE_BUF).
struct Msg {
  char kind;            // client: 'r' run, 'w' wait; daemon: 'i' id, 'e' end; monitor: 's' started, 'x' exited
  int id;
  int status;
  long long stamp;      // the command's output (bench_stamp's clock), 0 if none
  char argv0[200];      // 'r': the command; with --delay-ms its one argument
  char arg1[32];
};

void send_msg(int fd, const Msg& m) {
  if (write(fd, &m, sizeof m) != static_cast<ssize_t>(sizeof m)) die("write msg");
}

bool recv_msg(int fd, Msg* m) {
  for (;;) {
    const ssize_t n = read(fd, m, sizeof *m);
    if (n == static_cast<ssize_t>(sizeof *m)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

// The command: its path and up to two arguments ("" or null: none).
pid_t spawn(const char* argv0, const char* arg1, int out_fd, const char* arg2 = nullptr) {
  std::vector<std::string> args{argv0};
  if (arg1 && *arg1) args.push_back(arg1);
  if (arg2) args.push_back(arg2);
  return spawn_child(args, out_fd);
}

// The monitor: runs one command, reports its start and its end.
[[noreturn]] void monitor(const std::string& rec, const Msg& job, int report_fd) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) die("pipe2");
  const pid_t pid = spawn(job.argv0, job.arg1, out[1]);
  close(out[1]);
  Msg s{};
  s.kind = 's';
  s.id = job.id;
  s.status = pid < 0 ? -1 : 0;
  send_msg(report_fd, s);  // posix_spawn returned: the exec happened
  std::string output;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output.append(buf, static_cast<std::size_t>(n));
  }
  int st = 0;
  while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  const std::string text = std::to_string(st) + " " + output;
  const std::string tmp = rec + "/exit.tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) die("exit.tmp");
  close(fd);
  if (rename(tmp.c_str(), (rec + "/exit").c_str()) != 0) die("rename exit");
  Msg x{};
  x.kind = 'x';
  x.id = job.id;
  send_msg(report_fd, x);
  _exit(0);
}

// The daemon: one request at a time from the client, the monitors' reports.
[[noreturn]] void daemon_loop(const std::string& dir, int client_fd) {
  struct sigaction sa{};
  sa.sa_handler = SIG_IGN;
  sa.sa_flags = SA_NOCLDWAIT;  // monitors reap themselves away
  sigaction(SIGCHLD, &sa, nullptr);
  int rp[2];
  if (pipe2(rp, O_CLOEXEC) != 0) die("pipe2");
  int next = 0;
  auto spare = [&] { return dir + "/spare-" + std::to_string(next); };
  if (mkdir(spare().c_str(), 0700) != 0) die("mkdir spare");
  // A monitor forked ahead, waiting for its job: no fork on that start's
  // path (sbxfs tried one: bench/RESULTS.md, "a spare monitor, tried").
  int spare_job = -1;
  auto fork_spare = [&] {
    int jp[2];
    if (pipe2(jp, O_CLOEXEC) != 0) die("pipe2");
    const pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      close(jp[1]);
      close(client_fd);
      close(rp[0]);
      Msg job{};
      if (!recv_msg(jp[0], &job)) _exit(0);  // the daemon is done
      monitor(dir + "/rec-" + std::to_string(job.id), job, rp[1]);
    }
    close(jp[0]);
    spare_job = jp[1];
  };
  fork_spare();
  std::map<int, Msg> ended;   // id -> its end, once read
  std::map<int, bool> waiting;  // ids the client waits for
  for (;;) {
    pollfd p[2] = {{client_fd, POLLIN, 0}, {rp[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll");
    }
    Msg m{};
    if (p[1].revents & POLLIN) {
      if (!recv_msg(rp[0], &m)) die("report");
      const std::string rec = dir + "/rec-" + std::to_string(m.id);
      if (m.kind == 's') {
        Msg a{};
        a.kind = 'i';
        a.id = m.id;
        a.status = m.status;
        send_msg(client_fd, a);
        if (mkdir(spare().c_str(), 0700) != 0) die("mkdir spare");  // after the answer, as sbxfs does
        if (spare_job < 0) fork_spare();
      } else {
        char buf[256];
        const int fd = open((rec + "/exit").c_str(), O_RDONLY | O_CLOEXEC);
        const ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
        if (fd >= 0) close(fd);
        if (n <= 0) die("read exit");
        buf[n] = 0;
        Msg e{};
        e.kind = 'e';
        e.id = m.id;
        char* rest = nullptr;
        e.status = static_cast<int>(std::strtol(buf, &rest, 10));
        e.stamp = std::atoll(rest);
        if (waiting.erase(m.id)) send_msg(client_fd, e);
        else ended[m.id] = e;
      }
      continue;
    }
    if (!(p[0].revents & (POLLIN | POLLHUP))) continue;
    if (!recv_msg(client_fd, &m)) _exit(0);  // the client is done
    if (m.kind == 'w') {
      if (auto it = ended.find(m.id); it != ended.end()) {
        send_msg(client_fd, it->second);
        ended.erase(it);
      } else {
        waiting[m.id] = true;
      }
      continue;
    }
    // A run: the record, with the request in it, before the command runs.
    m.id = next;
    const std::string rec = dir + "/rec-" + std::to_string(next);
    const std::string req = spare() + "/request";
    const int fd = open(req.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, m.argv0, std::strlen(m.argv0)) < 0) die("request");
    close(fd);
    if (rename(spare().c_str(), rec.c_str()) != 0) die("rename record");
    ++next;
    if (m.status == 1) {  // to the monitor forked ahead
      send_msg(spare_job, m);
      close(spare_job);
      spare_job = -1;
      continue;
    }
    const pid_t mon = fork();
    if (mon < 0) die("fork");
    if (mon == 0) {
      close(client_fd);
      close(rp[0]);
      monitor(rec, m, rp[1]);
    }
  }
}

void print_row(const char* name, const std::vector<double>& v) {
  std::printf("%s", name);
  for (const double x : v) std::printf(" %.4f", x);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, stamp, shell_file;
  int runs = 200;
  int delay_ms = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--dir") dir = argv[i + 1];
    else if (k == "--runs") runs = std::atoi(argv[i + 1]);
    else if (k == "--stamp") stamp = argv[i + 1];
    else if (k == "--delay-ms") delay_ms = std::atoi(argv[i + 1]);
    else if (k == "--shell-file") shell_file = argv[i + 1];
  }
  if (dir.empty() || runs <= 0) {
    std::fprintf(stderr, "usage: %s --dir DIR [--runs N] [--stamp PATH] [--delay-ms MS]\n", argv[0]);
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) die("socketpair");
  const pid_t d = fork();
  if (d < 0) die("fork");
  if (d == 0) {
    close(sv[0]);
    daemon_loop(dir, sv[1]);
  }
  close(sv[1]);
  const int fd = sv[0];

  auto floor_run = [&](const char* argv0, const char* arg1, Msg* end, bool spare = false) {
    Msg r{};
    r.kind = 'r';
    r.status = spare ? 1 : 0;
    std::snprintf(r.argv0, sizeof r.argv0, "%s", argv0);
    std::snprintf(r.arg1, sizeof r.arg1, "%s", arg1);
    send_msg(fd, r);
    Msg id{};
    if (!recv_msg(fd, &id) || id.kind != 'i' || id.status != 0) die("start");
    Msg w{};
    w.kind = 'w';
    w.id = id.id;
    send_msg(fd, w);
    if (!recv_msg(fd, end) || end->kind != 'e') die("end");
  };

  auto spawn_wait_ms = [](const char* a0, const char* a1, const char* a2) {
    const long long t = now_ns();
    const pid_t p = spawn(a0, a1, -1, a2);
    int st = 0;
    while (p > 0 && waitpid(p, &st, 0) < 0 && errno == EINTR) {
    }
    if (p < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) die(a2 ? a2 : a0);
    return (now_ns() - t) / 1e6;
  };
  const std::string shell_floor_script = "/bin/true & cat " + shell_file + " > /dev/null; wait";

  std::vector<double> floor_rt, floor_rt_spare, spawn_rt, floor_wake, waitpid_wake, shell_true, shell_floor;
  for (int i = 0; i < runs; ++i) {
    if (!shell_file.empty()) {
      shell_true.push_back(spawn_wait_ms("/bin/bash", "-c", "true"));
      shell_floor.push_back(spawn_wait_ms("/bin/bash", "-c", shell_floor_script.c_str()));
    }

    long long t = now_ns();
    Msg end{};
    floor_run("/bin/true", "", &end);
    floor_rt.push_back((now_ns() - t) / 1e6);

    t = now_ns();
    floor_run("/bin/true", "", &end, true);
    floor_rt_spare.push_back((now_ns() - t) / 1e6);

    spawn_rt.push_back(spawn_wait_ms("/bin/true", "", nullptr));

    if (stamp.empty()) continue;
    const std::string delay = std::to_string(delay_ms);
    floor_run(stamp.c_str(), delay.c_str(), &end);
    const long long woke = now_ns();
    if (end.stamp > 0) floor_wake.push_back((woke - end.stamp) / 1e6);

    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) die("pipe2");
    const pid_t q = spawn(stamp.c_str(), delay.c_str(), out[1]);
    close(out[1]);
    int st = 0;
    while (q > 0 && waitpid(q, &st, 0) < 0 && errno == EINTR) {
    }
    const long long reaped = now_ns();
    char buf[64] = {};
    const ssize_t n = read(out[0], buf, sizeof buf - 1);
    close(out[0]);
    if (n > 0) waitpid_wake.push_back((reaped - std::atoll(buf)) / 1e6);
  }
  close(fd);
  int st = 0;
  waitpid(d, &st, 0);
  print_row("floor_rt", floor_rt);
  print_row("floor_rt_spare", floor_rt_spare);
  print_row("spawn_rt", spawn_rt);
  if (!stamp.empty()) {
    print_row("floor_wake", floor_wake);
    print_row("waitpid_wake", waitpid_wake);
  }
  if (!shell_file.empty()) {
    print_row("shell_true", shell_true);
    print_row("shell_floor", shell_floor);
  }
  return 0;
}
