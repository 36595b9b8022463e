#include "fsd/open_elsewhere.hpp"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <memory>
#include <string_view>
#include <unistd.h>

namespace fsd {

namespace {

/// The "ino:" line of /proc/PID/fdinfo/FD.
fuse_ino_t fdinfo_ino(const std::string& fdinfo) {
  std::ifstream in(fdinfo);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("ino:", 0) == 0) return std::strtoull(line.c_str() + 4, nullptr, 10);
  return 0;
}

}  // namespace

bool open_elsewhere(pid_t pid, const std::string& tail, fuse_ino_t ino) {
  if (pid <= 0) return false;
  const std::string base = "/proc/" + std::to_string(pid);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir((base + "/fd").c_str()), ::closedir);
  if (!dir) return false;
  char target[PATH_MAX];
  while (const dirent* e = ::readdir(dir.get())) {
    if (e->d_name[0] == '.') continue;
    // readlink of /proc/PID/fd/N names the file without asking its file
    // system (no request to ourselves); the inode tells it from a namesake.
    const ssize_t n = ::readlink((base + "/fd/" + e->d_name).c_str(), target, sizeof target);
    if (n <= 0 || static_cast<std::size_t>(n) >= sizeof target) continue;
    if (!std::string_view(target, static_cast<std::size_t>(n)).ends_with(tail)) continue;
    if (fdinfo_ino(base + "/fdinfo/" + e->d_name) == ino) return true;
  }
  return false;
}

}  // namespace fsd
