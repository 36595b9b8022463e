#include "fsd/session_key.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace fsd {
namespace {

/// The parent's pid from /proc/PID/stat; 0 when the parent is outside the
/// namespace, -1 when unreadable.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  // The command name may hold spaces and parentheses: fields follow the last ')'.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  int ppid = -1;
  if (std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

}  // namespace

pid_t session_key(pid_t pid) {
  if (pid <= 0) return 0;
  const pid_t sid = ::getsid(pid);
  if (sid != 0) return sid < 0 ? 0 : sid;
  // Climb while the parent is visible and shares the (outside) session. The
  // depth bound guards against a pid reused into a loop while we read.
  pid_t top = pid;
  for (int depth = 0; depth < 4096; ++depth) {
    const pid_t parent = parent_of(top);
    if (parent <= 0 || ::getsid(parent) != 0) break;
    top = parent;
  }
  return -top;
}

}  // namespace fsd
