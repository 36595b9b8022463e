#include "supervisor/proc_tree.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace sup {

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

}  // namespace

bool read_proc_stat(pid_t pid, ProcStat* out) {
  char path[64];
  ::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  char buf[2048];
  if (read_small(path, buf, sizeof buf) <= 0) return false;
  // comm (field 2) may contain spaces and parentheses: parse after the last ')'.
  char* p = ::strrchr(buf, ')');
  if (p == nullptr) return false;
  ++p;
  // Tokens after ')': index 0 = field 3 (state), 1 = ppid, ..., 19 = field 22.
  unsigned long long fields[20] = {};
  char state = '?';
  int idx = 0;
  while (*p != '\0' && idx < 20) {
    while (*p == ' ') ++p;
    if (*p == '\0') break;
    char* start = p;
    while (*p != ' ' && *p != '\0' && *p != '\n') ++p;
    if (idx == 0) state = *start;
    else fields[idx] = ::strtoull(start, nullptr, 10);
    ++idx;
    if (*p == '\n') break;
  }
  if (idx < 20) return false;
  out->state = state;
  out->ppid = static_cast<pid_t>(fields[1]);
  out->pgrp = static_cast<pid_t>(static_cast<long long>(fields[2]));
  out->session = static_cast<pid_t>(static_cast<long long>(fields[3]));
  out->utime = fields[11];
  out->stime = fields[12];
  out->cutime = fields[13];
  out->cstime = fields[14];
  out->starttime = fields[19];
  return true;
}

std::optional<std::uint64_t> process_start_time(pid_t pid) {
  ProcStat st;
  if (!read_proc_stat(pid, &st)) return std::nullopt;
  return st.starttime;
}

bool process_is_zombie(pid_t pid) {
  ProcStat st;
  return read_proc_stat(pid, &st) && (st.state == 'Z' || st.state == 'X');
}

std::vector<ProcEntry> scan_processes() {
  std::vector<ProcEntry> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (struct dirent* de = ::readdir(d)) {
    const char* name = de->d_name;
    if (name[0] < '1' || name[0] > '9') continue;
    char* end = nullptr;
    long v = ::strtol(name, &end, 10);
    if (end == nullptr || *end != '\0' || v <= 0) continue;
    ProcEntry e;
    e.pid = static_cast<pid_t>(v);
    if (read_proc_stat(e.pid, &e.stat)) out.push_back(e);
  }
  ::closedir(d);
  return out;
}

std::vector<ProcEntry> descendants_in(const std::vector<ProcEntry>& all, pid_t root) {
  std::vector<const ProcEntry*> by_parent;
  by_parent.reserve(all.size());
  for (const ProcEntry& e : all) by_parent.push_back(&e);
  std::sort(by_parent.begin(), by_parent.end(),
            [](const ProcEntry* a, const ProcEntry* b) { return a->stat.ppid < b->stat.ppid; });
  std::vector<ProcEntry> out;
  std::vector<pid_t> queue{root};
  for (size_t i = 0; i < queue.size(); ++i) {
    const pid_t parent = queue[i];
    auto lo = std::lower_bound(by_parent.begin(), by_parent.end(), parent,
                               [](const ProcEntry* e, pid_t p) { return e->stat.ppid < p; });
    for (auto it = lo; it != by_parent.end() && (*it)->stat.ppid == parent; ++it) {
      const pid_t pid = (*it)->pid;
      // A pid seen twice (it was re-parented during the scan) is one process.
      if (std::find(queue.begin(), queue.end(), pid) != queue.end()) continue;
      queue.push_back(pid);
      out.push_back(**it);
    }
  }
  return out;
}

std::vector<pid_t> descendants(pid_t pid) {
  std::vector<pid_t> out;
  for (const ProcEntry& e : descendants_in(scan_processes(), pid)) out.push_back(e.pid);
  return out;
}

std::uint64_t tree_cpu_ticks(pid_t monitor, const std::vector<ProcEntry>& all, std::uint64_t* start) {
  ProcStat st;
  const bool alive = read_proc_stat(monitor, &st);
  if (start) *start = alive ? st.starttime : 0;
  if (!alive) return 0;
  std::uint64_t total = st.cutime + st.cstime;  // reaped
  for (const ProcEntry& e : descendants_in(all, monitor))
    // utime + stime + the children it reaped itself
    total += e.stat.utime + e.stat.stime + e.stat.cutime + e.stat.cstime;
  return total;
}

std::uint64_t tree_cpu_ticks(pid_t monitor, std::uint64_t* start) {
  return tree_cpu_ticks(monitor, scan_processes(), start);
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

int pidfd_signal(int pidfd, int sig) {
#ifdef SYS_pidfd_send_signal
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
#else
  (void)pidfd;
  (void)sig;
  errno = ENOSYS;
  return -1;
#endif
}

namespace {

// Where the oom_kill line began at the last read: 0 before the first. The
// counters before it grow, and their digits with them, so the next read
// takes a window around it.
std::atomic<std::size_t> g_oom_line_at{0};
constexpr std::size_t kOomWindowBefore = 128;

// The line "oom_kill N" in buf[0, n), found after a '\n' (the window's first
// line may be cut) and whole; its start, or null.
const char* find_oom_line(const char* buf, std::size_t n, long long* count) {
  static constexpr char kKey[] = "\noom_kill ";
  const char* end = buf + n;
  const char* at = std::search(buf, end, kKey, kKey + sizeof kKey - 1);
  if (at == end) return nullptr;
  const char* num = at + sizeof kKey - 1;
  if (std::find(num, end, '\n') == end) return nullptr;  // the number may be cut
  *count = ::strtoll(num, nullptr, 10);
  return at + 1;
}

}  // namespace

long long read_oom_kill_count() {
  // Every monitor reads this at its start: one read of a window around
  // where the line was (by the monitor server, before it forked this one)
  // instead of a dozen through the first 2.5 KiB, each of which has the
  // kernel sum all the counters anew. Small buffers: a buffer for the whole
  // file (4 KiB and growing) would be pages more of each monitor's stack.
  const int fd = ::open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[256];
  long long found = -1;
  if (const std::size_t hint = g_oom_line_at.load(std::memory_order_relaxed); hint > kOomWindowBefore) {
    const off_t from = static_cast<off_t>(hint - kOomWindowBefore);
    ssize_t n;
    do {
      n = ::pread(fd, buf, sizeof buf, from);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      if (const char* line = find_oom_line(buf, static_cast<std::size_t>(n), &found)) {
        // Stored only when it moved: the page it is on stays the server's,
        // shared, in every monitor forked from it (4 kB each otherwise).
        const std::size_t at = static_cast<std::size_t>(from) + static_cast<std::size_t>(line - buf);
        if (at != hint) g_oom_line_at.store(at, std::memory_order_relaxed);
        ::close(fd);
        return found;
      }
    }
  }
  // A line at a time from the start, '\n' before the first as in the window.
  buf[0] = '\n';
  std::size_t have = 1;     // buf[0, have): a line not read to its end yet
  std::size_t have_at = 0;  // the file offset of buf[1]
  off_t pos = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf + have, sizeof buf - have, pos);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pos += n;
    have += static_cast<std::size_t>(n);
    if (const char* line = find_oom_line(buf, have, &found)) {
      g_oom_line_at.store(have_at + static_cast<std::size_t>(line - buf) - 1, std::memory_order_relaxed);
      break;
    }
    // Keep the last line, which may be cut, with the '\n' before it (buf[0]
    // is one, so there always is one).
    const char* last = buf + have;
    while (*(last - 1) != '\n') --last;
    std::size_t keep = static_cast<std::size_t>(buf + have - last) + 1;
    if (keep >= sizeof buf / 2) {  // longer than oom_kill's line: not the one
      buf[0] = '\n';
      keep = 1;
    } else {
      ::memmove(buf, last - 1, keep);
    }
    have_at = static_cast<std::size_t>(pos) - keep + 1;
    have = keep;
  }
  ::close(fd);
  return found;
}

std::size_t oom_kill_line_offset() { return g_oom_line_at.load(std::memory_order_relaxed); }

}  // namespace sup
