#include "fsd/opener_process.hpp"

#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>

#include "supervisor/unique_fd.hpp"

namespace fsd {

pid_t process_of_thread(pid_t tid) {
  if (tid <= 0) return 0;
  sup::UniqueFd fd(::open(("/proc/" + std::to_string(tid) + "/status").c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return 0;
  // "Tgid:" is the fourth line, within the first few hundred bytes.
  char buf[512];
  const ssize_t n = ::read(fd.get(), buf, sizeof buf - 1);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* at = std::strstr(buf, "\nTgid:");
  return at ? static_cast<pid_t>(std::strtol(at + 6, nullptr, 10)) : 0;
}

void OpenerProcess::wrote(pid_t tid) {
  for (pid_t& t : tids_) {
    if (t == tid) return;
    if (t == 0) {
      t = tid;
      return;
    }
  }
}

bool OpenerProcess::includes(pid_t tid) const {
  for (const pid_t t : tids_)
    if (t == tid) return true;
  const pid_t closer = process_of_thread(tid);
  if (closer == 0) return true;
  // A thread of the closer's process? Asked of the living: a writer that
  // has exited since is nobody's thread now.
  const std::string tasks = "/proc/" + std::to_string(closer) + "/task/";
  for (const pid_t t : tids_) {
    if (t == 0) break;
    if (::access((tasks + std::to_string(t)).c_str(), F_OK) == 0) return true;
  }
  // The opener's thread is gone: whose process it was cannot be told.
  return ::access(("/proc/" + std::to_string(tids_[0])).c_str(), F_OK) != 0;
}

}  // namespace fsd
