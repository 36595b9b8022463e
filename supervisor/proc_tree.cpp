#include "supervisor/proc_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <set>
#include <string>

namespace sup {

namespace {

std::string slurp(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// Fields of /proc/PID/stat after the command name, which may hold spaces and
// parentheses: field 3 is at index 0.
std::vector<std::string> stat_fields(pid_t pid) {
  std::string s = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close = s.rfind(')');
  std::vector<std::string> out;
  if (close == std::string::npos) return out;
  size_t i = close + 2;
  while (i < s.size()) {
    size_t j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::uint64_t field(const std::vector<std::string>& f, int stat_field) {
  size_t idx = static_cast<size_t>(stat_field - 3);
  if (idx >= f.size()) return 0;
  return std::strtoull(f[idx].c_str(), nullptr, 10);
}

void children_of(pid_t pid, std::vector<pid_t>& out) {
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string kids = slurp(dir + "/" + e->d_name + "/children");
    size_t i = 0;
    while (i < kids.size()) {
      size_t j = kids.find(' ', i);
      if (j == std::string::npos) j = kids.size();
      if (j > i) {
        pid_t c = static_cast<pid_t>(std::strtol(kids.c_str() + i, nullptr, 10));
        if (c > 0) {
          out.push_back(c);
          children_of(c, out);
        }
      }
      i = j + 1;
    }
  }
  ::closedir(d);
}

}  // namespace

std::optional<std::uint64_t> process_start_time(pid_t pid) {
  auto f = stat_fields(pid);
  if (f.size() < 20) return std::nullopt;
  return field(f, 22);
}

bool process_is_zombie(pid_t pid) {
  auto f = stat_fields(pid);
  return !f.empty() && (f[0] == "Z" || f[0] == "X");
}

std::vector<pid_t> descendants(pid_t pid) {
  std::vector<pid_t> out;
  children_of(pid, out);
  return out;
}

std::uint64_t tree_cpu_ticks(pid_t monitor, std::uint64_t* start) {
  auto f = stat_fields(monitor);
  if (start) *start = field(f, 22);
  if (f.size() < 20) return 0;
  std::uint64_t total = field(f, 16) + field(f, 17);  // cutime + cstime: reaped
  for (pid_t p : descendants(monitor)) {
    auto g = stat_fields(p);
    // utime + stime + the children it reaped itself
    total += field(g, 14) + field(g, 15) + field(g, 16) + field(g, 17);
  }
  return total;
}

int open_pidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

namespace {

bool environ_holds(pid_t pid, const std::vector<std::string>& marks) {
  const std::string env = '\0' + slurp("/proc/" + std::to_string(pid) + "/environ");
  for (const std::string& m : marks)
    if (env.find('\0' + m + '\0') == std::string::npos && !env.ends_with('\0' + m)) return false;
  return true;
}

// One sweep: kills (through a pidfd, its start time re-checked) every match;
// returns how many were not in `killed` yet.
std::size_t kill_sweep(pid_t root, std::uint64_t root_start, const std::vector<std::string>& marks,
                       std::set<pid_t>& killed) {
  std::vector<pid_t> found;
  DIR* d = ::opendir("/proc");
  if (!d) return 0;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::strtol(e->d_name, nullptr, 10));
    if (pid <= 1 || pid == ::getpid()) continue;
    const auto f = stat_fields(pid);
    if (f.size() < 20 || f[0] == "Z" || field(f, 22) < root_start) continue;
    const bool ours = static_cast<pid_t>(field(f, 5)) == root || static_cast<pid_t>(field(f, 6)) == root ||
                      (!marks.empty() && environ_holds(pid, marks));
    if (!ours) continue;
    found.push_back(pid);
    children_of(pid, found);
  }
  ::closedir(d);
  std::size_t fresh = 0;
  for (pid_t pid : found) {
    const auto start = process_start_time(pid);
    const int fd = open_pidfd(pid);
    if (fd < 0) continue;
    if (process_start_time(pid) == start && ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0) == 0)
      fresh += killed.insert(pid).second ? 1 : 0;
    ::close(fd);
  }
  return fresh;
}

}  // namespace

std::size_t kill_orphaned_tree(pid_t root, std::uint64_t root_start, const std::vector<std::string>& env_marks) {
  // Again while a sweep finds something: a process may fork while we look.
  std::set<pid_t> killed;
  for (int round = 0; round < 5; ++round)
    if (kill_sweep(root, root_start, env_marks, killed) == 0) break;
  return killed.size();
}

}  // namespace sup
