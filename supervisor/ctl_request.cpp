#include "supervisor/ctl_request.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "supervisor/monitor_ctl.hpp"

namespace sup {

Status write_ctl(const std::string& dir, const std::string& line) {
  const std::string ctl = dir + "/" + kCtlFile;
  int fd = ::open(ctl.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    // ENXIO/ENOENT: the monitor is finishing; its exit event follows.
    if (errno == ENXIO || errno == ENOENT) return Ok{};
    return error_from_errno(errno, "open " + ctl);
  }
  ssize_t n = ::write(fd, line.data(), line.size());
  int e = errno;
  ::close(fd);
  if (n < 0 && e != EPIPE) return error_from_errno(e, "write " + ctl);
  return Ok{};
}

bool monitor_answers(const std::string& dir) {
  // A non-blocking open for writing fails with ENXIO when no one reads.
  const int fd = ::open((dir + "/" + kCtlFile).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool fifo = ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);  // not a file put in its place
  ::close(fd);
  return fifo;
}

}  // namespace sup
