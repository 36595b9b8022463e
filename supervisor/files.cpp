#include "supervisor/files.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "supervisor/unique_fd.hpp"

namespace sup {

namespace {
Status write_all(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return error_from_errno(errno, "write " + path);
    }
    off += static_cast<size_t>(n);
  }
  return Ok{};
}
}  // namespace

Status write_file_atomic(const std::string& path, const std::string& content, bool sync) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) return error_from_errno(errno, "create " + tmp);
  if (auto st = write_all(fd.get(), content, tmp); !st) {
    ::unlink(tmp.c_str());
    return st;
  }
  if (sync && ::fsync(fd.get()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return error_from_errno(e, "fsync " + tmp);
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return error_from_errno(e, "rename " + tmp);
  }
  if (sync) {
    std::string dir = std::filesystem::path(path).parent_path().string();
    UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dfd) ::fsync(dfd.get());
  }
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

}  // namespace sup
