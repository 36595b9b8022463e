// procs/ID/log, stdout, stderr and logs/ID.log: the state directory's files,
// read with pread. Their attributes carry the backing file's real size and
// mtime with attr_timeout 0, and they are direct_io: every tool, `tail -f`
// included, sees the file grow (NOTES.md §2).
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsd/files.hpp"

namespace fsd {

namespace {

class LogHandle : public Handle {
 public:
  explicit LogHandle(int fd) : fd_(fd) {}
  ~LogHandle() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Reply read(fuse_req_t, std::size_t size, off_t off) override {
    if (fd_ < 0) return Reply::data({});  // an empty slot has no log yet
    std::string buf(size, '\0');
    const ssize_t n = ::pread(fd_, buf.data(), size, off);
    if (n < 0) return Reply::error(errno);
    buf.resize(static_cast<std::size_t>(n));
    return Reply::data(std::move(buf));
  }

  // The file this handle reads, even after a restart of the slot replaced it.
  bool fstat(struct stat* st) override { return fd_ >= 0 && ::fstat(fd_, st) == 0; }

 private:
  const int fd_;
};

}  // namespace

std::string log_path(const Node& node) {
  switch (node.kind) {
    case Kind::stdout_log: return node.record->stdout_file;
    case Kind::stderr_log: return node.record->stderr_file;
    default: return node.record->log_file;
  }
}

std::unique_ptr<Handle> open_log(const Node& node) {
  const std::string path = log_path(node);
  const int fd = path.empty() ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  return std::make_unique<LogHandle>(fd);
}

}  // namespace fsd
