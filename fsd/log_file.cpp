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
  /// `stream`: stdout or stderr, which may begin as a second name of the log.
  LogHandle(std::string path, bool stream, int fd, int open_err, std::vector<std::string> secrets)
      : path_(std::move(path)), stream_(stream), fd_(fd), open_err_(open_err), secrets_(std::move(secrets)) {
    for (const auto& s : secrets_) reach_ = std::max(reach_, s.size() - 1);
    note_link();
  }
  ~LogHandle() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Reply read(fuse_req_t, std::size_t size, off_t off) override {
    if (fd_ < 0 && open_err_) return Reply::error(open_err_);  // EMFILE: say so, never "empty"
    // stdout and stderr appear at their stream's first byte; an empty slot
    // has no log yet: a reader that came early (tail -f) finds them later.
    if (fd_ < 0) reopen();
    if (fd_ < 0) return Reply::data({});
    if (secrets_.empty() && !linked_) {
      // Nothing to mask: the kernel moves the bytes (no copy in the daemon).
      // Clamped to the size now, so libfuse never reads past the end.
      struct stat st {};
      if (::fstat(fd_, &st) != 0) return Reply::error(errno);
      if (off >= st.st_size) return Reply::data({});
      return Reply::file(fd_, off, std::min<std::size_t>(size, static_cast<std::size_t>(st.st_size - off)));
    }
    const off_t lo = std::max<off_t>(0, off - static_cast<off_t>(reach_));
    const std::size_t before = static_cast<std::size_t>(off - lo);
    for (;;) {
      std::string buf(before + size + reach_, '\0');
      const ssize_t n = ::pread(fd_, buf.data(), buf.size(), lo);
      if (n < 0) return Reply::error(errno);
      // A stream linked to the log got its own file when the other stream
      // wrote; bytes read after that may be the other stream's: read again.
      if (linked_ && replaced()) {
        reopen();
        continue;
      }
      buf.resize(static_cast<std::size_t>(n));
      if (buf.size() <= before) return Reply::data({});
      if (!secrets_.empty()) sup::mask_secrets_in_place(buf, secrets_);
      return Reply::data(buf.substr(before, size));
    }
  }

  // The file this handle reads, even after a restart of the slot replaced it.
  bool fstat(struct stat* st) override {
    if (linked_ && replaced()) reopen();
    return fd_ >= 0 && ::fstat(fd_, st) == 0;
  }

 private:
  // The monitor renames the stream's own file over the link (relay.cpp).
  bool replaced() const {
    struct stat now {}, ours {};
    return ::stat(path_.c_str(), &now) == 0 && ::fstat(fd_, &ours) == 0 && now.st_ino != ours.st_ino;
  }
  void reopen() {
    if (path_.empty()) return;
    const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      linked_ = false;  // gone (disk full): keep what we have
      return;
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
    note_link();
  }
  void note_link() {
    struct stat st {};
    linked_ = stream_ && fd_ >= 0 && ::fstat(fd_, &st) == 0 && st.st_nlink > 1;
  }

  const std::string path_;
  const bool stream_;
  int fd_;
  const int open_err_;
  const std::vector<std::string> secrets_;  // fixed at open
  std::size_t reach_ = 0;                   // longest secret - 1
  bool linked_ = false;                     // a stream whose file is the log's second name
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
  const bool stream = node.kind == Kind::stdout_log || node.kind == Kind::stderr_log;
  return std::make_unique<LogHandle>(path, stream, fd, err, fs.sup().secrets(node.record->bg_id));
}

}  // namespace fsd
