#include "supervisor/orphan_sweep.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <set>

#include "supervisor/proc_tree.hpp"

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
  const std::vector<ProcEntry> all = scan_processes();
  std::vector<pid_t> found;
  for (const ProcEntry& e : all) {
    if (e.pid <= 1 || e.pid == ::getpid()) continue;
    if (e.stat.state == 'Z' || e.stat.starttime < root_start) continue;
    const bool ours = e.stat.pgrp == root || e.stat.session == root || (!marks.empty() && environ_holds(e.pid, marks));
    if (!ours) continue;
    found.push_back(e.pid);
    for (const ProcEntry& d : descendants_in(all, e.pid)) found.push_back(d.pid);
  }
  std::size_t fresh = 0;
  for (pid_t pid : found) {
    const auto start = process_start_time(pid);
    const int fd = open_pidfd(pid);
    if (fd < 0) continue;
    if (process_start_time(pid) == start && pidfd_signal(fd, SIGKILL) == 0) fresh += killed.insert(pid).second ? 1 : 0;
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
