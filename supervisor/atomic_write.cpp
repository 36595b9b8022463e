#include "supervisor/atomic_write.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace sup {

int write_all(int fd, const void* buf, std::size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // not for regular files or pipes
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return 0;
}

namespace {
// The folder of a path relative to dirfd, opened for its fsync; -1 if not.
int open_parent(int dirfd, const char* name) {
  const char* slash = ::strrchr(name, '/');
  if (slash == nullptr) return dirfd == AT_FDCWD ? ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                                 : ::fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
  const std::string dir(name, slash == name ? 1 : static_cast<std::size_t>(slash - name));
  return ::openat(dirfd, dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}
}  // namespace

// The names are on the heap, not in PATH_MAX arrays: every monitor writes
// its records with this, and each 4 KiB of stack frame is a page more of
// its own (bench/RESULTS.md, the monitor's memory).
std::string atomic_tmp_name(std::string_view name) { return std::string(name) + ".tmp"; }

int write_file_atomic_at(int dirfd, const char* name, std::string_view content, bool sync, const char** failed) {
  const std::string tmp = atomic_tmp_name(name);
  const char* step = "create";
  int fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (failed) *failed = step;
    return errno;
  }
  step = "write";
  int err = write_all(fd, content.data(), content.size());
  if (err == 0 && ::ftruncate(fd, static_cast<off_t>(content.size())) != 0) err = errno;
  if (err == 0 && sync && ::fsync(fd) != 0) {
    step = "fsync";
    err = errno;
  }
  if (::close(fd) != 0 && err == 0 && errno != EINTR) err = errno;
  if (err == 0 && ::renameat(dirfd, tmp.c_str(), dirfd, name) != 0) {
    step = "rename";
    err = errno;
  }
  if (err != 0) {
    ::unlinkat(dirfd, tmp.c_str(), 0);
    if (failed) *failed = step;
    return err;
  }
  if (sync) {
    const int dfd = open_parent(dirfd, name);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  return 0;
}

int reserve_file(int dirfd, const char* name, std::size_t size) {
  int fd = ::openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size >= static_cast<off_t>(size)) {
    ::close(fd);
    return 0;
  }
  char blank[512];
  ::memset(blank, ' ', sizeof blank);
  int err = 0;
  for (std::size_t done = 0; done < size && err == 0; done += sizeof blank) err = write_all(fd, blank, sizeof blank);
  ::close(fd);
  return err;
}

}  // namespace sup
