// sbxfs-monitor: /proc readers and the "signal the whole tree" sweep.
//
// The monitor is a child subreaper, so every process started below it stays
// below it (orphans are re-parented to the monitor, setsid() does not change
// the parent). "Every descendant" is therefore the set of processes whose
// parent chain reaches the monitor. It is found by scanning /proc/*/stat:
// /proc/PID/task/TID/children only exists with CONFIG_PROC_CHILDREN, which
// not every kernel has (the development VM does not), and the kernel documents
// it as possibly incomplete anyway. Processes forked during a sweep are caught
// by the group signal or by the next sweep (the SIGKILL sweep repeats).
#include "monitor.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace sbxmon {

namespace {

// Reads a small /proc file into buf (NUL-terminated). Returns length or -1.
ssize_t read_small(const char* path, char* buf, size_t cap) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len + 1 < cap) {
    ssize_t n = ::read(fd, buf + len, cap - 1 - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return -1;
    }
    if (n == 0) break;
    len += static_cast<size_t>(n);
  }
  ::close(fd);
  buf[len] = '\0';
  return static_cast<ssize_t>(len);
}

int sys_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

int sys_pidfd_send_signal(int pidfd, int sig) {
#ifdef SYS_pidfd_send_signal
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
#else
  (void)pidfd;
  (void)sig;
  errno = ENOSYS;
  return -1;
#endif
}

struct Entry {
  pid_t pid;
  pid_t ppid;
};

// All processes on the system with their parent.
void scan_processes(std::vector<Entry>* out) {
  out->clear();
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return;
  while (struct dirent* de = ::readdir(d)) {
    const char* name = de->d_name;
    if (name[0] < '1' || name[0] > '9') continue;
    char* end = nullptr;
    long v = ::strtol(name, &end, 10);
    if (end == nullptr || *end != '\0' || v <= 0) continue;
    ProcStat st;
    if (!read_proc_stat(static_cast<pid_t>(v), &st)) continue;
    out->push_back(Entry{static_cast<pid_t>(v), st.ppid});
  }
  ::closedir(d);
}

// Descendants of root (root excluded), parents before children.
void descendants_of(pid_t root, std::vector<Entry>* out) {
  std::vector<Entry> all;
  scan_processes(&all);
  std::sort(all.begin(), all.end(),
            [](const Entry& a, const Entry& b) { return a.ppid < b.ppid; });
  out->clear();
  std::vector<pid_t> queue{root};
  for (size_t i = 0; i < queue.size(); ++i) {
    pid_t parent = queue[i];
    auto lo = std::lower_bound(all.begin(), all.end(), parent,
                               [](const Entry& e, pid_t p) { return e.ppid < p; });
    for (auto it = lo; it != all.end() && it->ppid == parent; ++it) {
      if (it->pid == root) continue;  // cannot happen; be safe against loops
      if (std::find(queue.begin(), queue.end(), it->pid) != queue.end()) continue;
      queue.push_back(it->pid);
      out->push_back(*it);
    }
  }
}

}  // namespace

bool read_proc_stat(pid_t pid, ProcStat* out) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  char buf[2048];
  if (read_small(path, buf, sizeof buf) <= 0) return false;
  // comm (field 2) may contain spaces and parentheses: parse after the last ')'.
  char* p = ::strrchr(buf, ')');
  if (p == nullptr) return false;
  ++p;
  // Tokens after ')': index 0 = field 3 (state), 1 = ppid, 2 = pgrp, 19 = starttime.
  unsigned long long fields[20] = {};
  int idx = 0;
  while (*p != '\0' && idx < 20) {
    while (*p == ' ') ++p;
    if (*p == '\0') break;
    char* start = p;
    while (*p != ' ' && *p != '\0' && *p != '\n') ++p;
    if (idx > 0) fields[idx] = ::strtoull(start, nullptr, 10);
    ++idx;
    if (*p == '\n') break;
  }
  if (idx < 20) return false;
  out->ppid = static_cast<pid_t>(fields[1]);
  out->pgrp = static_cast<pid_t>(static_cast<long long>(fields[2]));
  out->starttime = fields[19];
  return true;
}

long long read_oom_kill_count() {
  char buf[16384];
  if (read_small("/proc/vmstat", buf, sizeof buf) <= 0) return -1;
  const char* p = buf;
  while (p != nullptr && *p != '\0') {
    if (::strncmp(p, "oom_kill ", 9) == 0) return ::strtoll(p + 9, nullptr, 10);
    p = ::strchr(p, '\n');
    if (p != nullptr) ++p;
  }
  return -1;
}

size_t signal_tree(pid_t group, bool group_usable, int sig, bool also_cont) {
  pid_t self = ::getpid();
  auto signal_group = [&] {
    if (group <= 1) return;
    ::kill(-group, sig);
    if (also_cont) ::kill(-group, SIGCONT);
  };
  // While the leader is not reaped its pid cannot be recycled, so the group
  // is safe to signal. Signal it first: that is atomic for its members.
  if (group_usable) signal_group();

  std::vector<Entry> desc;
  descendants_of(self, &desc);
  bool saw_group = false;
  for (const Entry& e : desc) {
    // Pin the process with a pidfd, then check it still is the one we found
    // (same parent, or re-parented to us after its parent died): a pid that
    // was recycled in between is not signalled.
    int pfd = sys_pidfd_open(e.pid);
    if (pfd < 0) {
      if (errno != ENOSYS) continue;  // gone
      ::kill(e.pid, sig);             // no pidfds: best effort
      if (also_cont) ::kill(e.pid, SIGCONT);
      continue;
    }
    ProcStat st;
    if (read_proc_stat(e.pid, &st) && (st.ppid == e.ppid || st.ppid == self)) {
      if (st.pgrp == group) saw_group = true;
      sys_pidfd_send_signal(pfd, sig);
      if (also_cont) sys_pidfd_send_signal(pfd, SIGCONT);
    }
    ::close(pfd);
  }
  if (!group_usable && saw_group) signal_group();
  return desc.size();
}

}  // namespace sbxmon
