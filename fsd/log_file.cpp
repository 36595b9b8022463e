// procs/ID/log, stdout, stderr and logs/ID.log: the state directory's files,
// read with pread. Their attributes carry the backing file's real size and
// mtime with attr_timeout 0, and they are direct_io: every tool, `tail -f`
// included, sees the file grow (NOTES.md §2).
//
// Without secrets a read is answered straight from the file (spliced, see
// Reply::file); st_blksize invites large reads (tree.cpp).
//
// Secrets are masked byte for byte ('*' for each byte of a secret), so the
// size and every offset stay true; each read masks a window widened by the
// longest secret on both sides, so a secret split across reads, or across
// two writes of the command, is masked whole.
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "fsd/files.hpp"
#include "supervisor/secrets.hpp"

namespace fsd {

namespace {

class LogHandle : public Handle {
 public:
  /// `open_err`: why the backing file could not be opened (0: none, or no log yet).
  LogHandle(std::string path, int fd, int open_err, std::vector<std::string> secrets)
      : path_(std::move(path)), fd_(fd), open_err_(open_err), secrets_(std::move(secrets)) {
    for (const auto& s : secrets_) reach_ = std::max(reach_, s.size() - 1);
  }
  ~LogHandle() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Reply read(fuse_req_t, std::size_t size, off_t off) override {
    if (fd_ < 0 && open_err_) return Reply::error(open_err_);  // EMFILE: say so, never "empty"
    // stdout and stderr appear at their stream's first byte; an empty slot
    // has no log yet: a reader that came early (tail -f) finds them later.
    if (fd_ < 0 && !path_.empty()) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return Reply::data({});
    if (secrets_.empty()) {
      // Nothing to mask: the kernel moves the bytes (no copy in the daemon).
      // Clamped to the size now, so libfuse never reads past the end.
      struct stat st {};
      if (::fstat(fd_, &st) != 0) return Reply::error(errno);
      if (off >= st.st_size) return Reply::data({});
      return Reply::file(fd_, off, std::min<std::size_t>(size, static_cast<std::size_t>(st.st_size - off)));
    }
    const off_t lo = secrets_.empty() ? off : std::max<off_t>(0, off - static_cast<off_t>(reach_));
    const std::size_t before = static_cast<std::size_t>(off - lo);
    std::string buf(before + size + (secrets_.empty() ? 0 : reach_), '\0');
    const ssize_t n = ::pread(fd_, buf.data(), buf.size(), lo);
    if (n < 0) return Reply::error(errno);
    buf.resize(static_cast<std::size_t>(n));
    if (buf.size() <= before) return Reply::data({});
    if (!secrets_.empty()) sup::mask_secrets_in_place(buf, secrets_);
    return Reply::data(buf.substr(before, size));
  }

  // The file this handle reads, even after a restart of the slot replaced it.
  bool fstat(struct stat* st) override { return fd_ >= 0 && ::fstat(fd_, st) == 0; }

 private:
  const std::string path_;
  int fd_;
  const int open_err_;
  const std::vector<std::string> secrets_;  // fixed at open
  std::size_t reach_ = 0;                   // longest secret - 1
};

}  // namespace

std::string log_path(const Node& node) {
  switch (node.kind) {
    case Kind::stdout_log: return node.record->stdout_file;
    case Kind::stderr_log: return node.record->stderr_file;
    default: return node.record->log_file;
  }
}

std::unique_ptr<Handle> open_log(Filesystem& fs, const Node& node) {
  const std::string path = log_path(node);
  const int fd = path.empty() ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int err = fd < 0 && !path.empty() && errno != ENOENT ? errno : 0;
  return std::make_unique<LogHandle>(path, fd, err, fs.sup().secrets(node.record->bg_id));
}

}  // namespace fsd
