// sbxfs-monitor --serve: the fork server that starts monitors.
//
// A start used to exec a fresh sbxfs-monitor, which then forked again to
// detach: two process creations and an exec before the command's own fork.
// The server is started once per supervisor and forks a ready monitor per
// job instead (bench/RESULTS.md has the figures).
//
// The job protocol is in supervisor/monitor_job.hpp; the command reads one
// byte from the go socket before its exec (the supervisor first publishes
// the record). The forked monitor reads the job, so a big job never stalls
// the server.
// EOF on fd 0 (the supervisor is gone) ends the server; the monitors it
// forked live on, each in its own session, reaped by the kernel while the
// server runs (SA_NOCLDWAIT) and by init or a subreaper afterwards.
#include "monitor.hpp"

#include "supervisor/monitor_job.hpp"
#include "supervisor/proc_tree.hpp"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace sbxmon {

namespace {

void report_error(int fd, int err, const char* what) {
  char line[256];
  int n = snprintf(line, sizeof line, "err %d %s: %s\n", err, what, ::strerror(err));
  if (n > 0) (void)write_all(fd, line, static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1);
}

// A fork copies no page table entries of file mappings nor of the vDSO,
// so a new monitor took a page fault at the first use of each page of its
// code, constants and the vDSO it uses (15 a start, 10-20 us each on the
// 2-vCPU guest of bench/RESULTS.md). The server finds those read-only
// ranges once; each monitor maps them with one call a range. The pages
// are the ones every monitor shares: no more memory, though each
// monitor's PSS now counts its share of all of them. EINVAL (kernels
// before 5.14): as before.
struct Range {
  uintptr_t from, to;
};
Range g_read_only[8];
size_t g_read_only_count = 0;

void add_read_only(uintptr_t from, uintptr_t to) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  from &= ~(page - 1);
  to = (to + page - 1) & ~(page - 1);
  if (from >= to) return;
  for (size_t i = 0; i < g_read_only_count; ++i) {
    Range& r = g_read_only[i];
    if (from <= r.to && to >= r.from) {  // overlaps or touches: one range
      r.from = from < r.from ? from : r.from;
      r.to = to > r.to ? to : r.to;
      return;
    }
  }
  if (g_read_only_count < sizeof g_read_only / sizeof g_read_only[0]) g_read_only[g_read_only_count++] = {from, to};
}

// The program only, the first object listed: the monitor is linked
// statically, but a sanitizer's build is not, and all of its libraries'
// pages would cost each start more than their faults.
int note_read_only_segments(dl_phdr_info* info, size_t, void*) {
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD && !(ph.p_flags & PF_W))
      add_read_only(info->dlpi_addr + ph.p_vaddr, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  return 1;
}

void find_read_only() {
  ::dl_iterate_phdr(note_read_only_segments, nullptr);
  // The vDSO is mapped whole, as its file image: a segment's file offset is its place.
  if (const uintptr_t vdso = ::getauxval(AT_SYSINFO_EHDR); vdso != 0) {
    const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(vdso);
    const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(vdso + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; ++i)
      if (ph[i].p_type == PT_LOAD) add_read_only(vdso + ph[i].p_offset, vdso + ph[i].p_offset + ph[i].p_filesz);
  }
  // The vDSO's data pages cannot be mapped that way, but a fork copies
  // their entries once the server has used them (the clocks monitors read).
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
}

void map_read_only() {
  for (size_t i = 0; i < g_read_only_count; ++i)
    (void)::madvise(reinterpret_cast<void*>(g_read_only[i].from), g_read_only[i].to - g_read_only[i].from,
                    MADV_POPULATE_READ);
}

// In the forked child: becomes the monitor of one job.
[[noreturn]] void run_job(int job_fd, int report_fd, int go_fd) {
  map_read_only();
  // stdout is the report pipe; stdin the go socket, no longer the server's.
  if (::dup2(report_fd, 1) < 0) ::_exit(1);
  if (::dup2(go_fd, 0) < 0) {
    report_error(1, errno, "cannot take the go socket");
    ::_exit(1);
  }
  std::string job;
  char buf[4096];  // a bigger one would be stack pages of every monitor (bench/RESULTS.md)
  for (;;) {
    ssize_t n = ::read(job_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      report_error(1, errno, "cannot read the job");
      ::_exit(1);
    }
    if (n == 0) break;
    job.append(buf, static_cast<size_t>(n));
  }
  sup::JobParts parts;
  if (!sup::parse_job(job, &parts)) {
    report_error(1, EINVAL, "malformed job");
    ::_exit(1);
  }
  const char* cwd = parts.cwd;
  std::vector<char*>& args = parts.args;
  std::vector<char*>& env = parts.env;
  if (::chdir(cwd) != 0) {
    int e = errno;
    std::string what = std::string("cannot change to '") + cwd + "'";
    report_error(1, e, what.c_str());
    ::_exit(1);
  }
  env.push_back(nullptr);
  environ = env.data();  // the command's environment: execvp looks up PATH in it
  args.insert(args.begin(), const_cast<char*>("sbxfs-monitor"));
  args.push_back(nullptr);
  ::_exit(run_monitor(static_cast<int>(args.size() - 1), args.data(), false));
}

}  // namespace

int serve() {
  // The daemon that spawned us. Once it is gone (killed while this server
  // was stopped, say), no job of its may start: the next daemon has taken
  // the state directory back, and a late monitor would work in its folders.
  const pid_t daemon = ::getppid();
  // Only the socket and stdout/stderr: nothing of the supervisor's (its
  // /dev/fuse above all) may be held open by a process that outlives it.
#ifdef SYS_close_range
  ::syscall(SYS_close_range, 3U, ~0U, 0U);
#endif
  ::setsid();  // a Ctrl-C meant for a foreground daemon is not for us
  if (::chdir("/") != 0) {
    // Not pinning the daemon's cwd is all this is for.
  }
  struct sigaction sa;
  ::memset(&sa, 0, sizeof sa);
  ::sigemptyset(&sa.sa_mask);
  sa.sa_handler = SIG_IGN;
  sa.sa_flags = SA_NOCLDWAIT;  // monitors that end are reaped by the kernel
  ::sigaction(SIGCHLD, &sa, nullptr);
  sa.sa_flags = 0;
  ::sigaction(SIGPIPE, &sa, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Loaded once here and inherited by every monitor (else each one opens
  // and reads the time zone file for its first timestamp: perf trace).
  ::tzset();
  prepare_child_stack();  // the same: mapped once, inherited (monitor.hpp)
  find_read_only();
  (void)sup::read_oom_kill_count();  // where its line is: each monitor reads the count at its start

  for (;;) {
    char payload[64];
    iovec iov{payload, sizeof payload};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(0, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? 0 : 1;  // the supervisor is gone
    if (::getppid() != daemon) return 0;  // it died with jobs queued here
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t j = 0; j < k; ++j) {
        int fd;
        ::memcpy(&fd, CMSG_DATA(c) + j * sizeof(int), sizeof fd);
        fds.push_back(fd);
      }
    }
    bool ok = fds.size() == sup::kJobFds && !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
              static_cast<size_t>(n) == sup::kJobMagicLen && ::memcmp(payload, sup::kJobMagic, sup::kJobMagicLen) == 0;
    if (ok) {
      pid_t pid = ::fork();
      if (pid == 0) run_job(fds[0], fds[1], fds[2]);
      if (pid < 0) report_error(fds[1], errno, "cannot fork the monitor");
    } else {
      diag("ignored a malformed job message");
    }
    for (int fd : fds) ::close(fd);
  }
}

}  // namespace sbxmon
