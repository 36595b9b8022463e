#include "supervisor/files.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <thread>

#include "supervisor/atomic_write.hpp"
#include "supervisor/unique_fd.hpp"

namespace sup {

Status write_file_atomic(const std::string& path, const std::string& content, bool sync) {
  const char* step = "";
  if (int e = write_file_atomic_at(AT_FDCWD, path.c_str(), content, sync, &step))
    return error_from_errno(e, std::string(step) + " " + atomic_tmp_name(path));
  return Ok{};
}

Result<std::optional<std::string>> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::optional<std::string>{};
    return error_from_errno(errno, "open " + path);
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return error_from_errno(errno, "read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return std::optional<std::string>(std::move(out));
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

Status make_dirs(const std::string& path, unsigned mode) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return error_from_errno(ec.value(), "mkdir " + path);
  if (::chmod(path.c_str(), mode) != 0) return error_from_errno(errno, "chmod " + path);
  return Ok{};
}

bool spread_subdirectories(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  int flags = 0;
  if (!fd || ::ioctl(fd.get(), FS_IOC_GETFLAGS, &flags) != 0) return false;
  if (flags & FS_TOPDIR_FL) return true;
  flags |= FS_TOPDIR_FL;
  return ::ioctl(fd.get(), FS_IOC_SETFLAGS, &flags) == 0;
}

int lock_within(int fd, std::chrono::milliseconds wait) {
  const auto give_up = std::chrono::steady_clock::now() + wait;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= give_up) return errno;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

}  // namespace sup
