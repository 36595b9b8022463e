// procs/ID/log, stdout, stderr and logs/ID.log of a record an older build
// wrote (a log and no index; the others: stream_file.cpp): the state
// directory's files, read with pread. Their attributes carry the backing file's real size and
// mtime with attr_timeout 0, and they are direct_io while the command runs:
// every tool, `tail -f` included, sees the file grow (tail -f polls st_size
// once a second on FUSE and reads exactly the growth; with st_size 0 it
// reports "file truncated"). Once it has exited the kernel keeps them
// (ended_output_cache.hpp).
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
#include <memory>
#include <mutex>

#include "fsd/files.hpp"
#include "supervisor/secrets.hpp"

namespace fsd {

namespace {

// Concurrent reads and fstats of one open file are allowed (the kernel sends
// them from several threads): the open backing file is an immutable Source,
// shared by every read that uses it and by the reply that splices from it.
// Replacing it swaps the pointer under mu_; the old descriptor closes when
// its last user is done.
class LogHandle : public Handle {
 public:
  /// `fd`: the backing file, or none (`open_err`: why it could not be opened;
  /// 0: no such file yet). `stream`: stdout or stderr, which may begin as a
  /// second name of the log.
  LogHandle(std::string path, bool stream, sup::UniqueFd fd, int open_err, std::vector<std::string> secrets)
      : path_(std::move(path)), stream_(stream), open_err_(open_err), secrets_(std::move(secrets)) {
    reach_ = sup::secret_reach(secrets_);
    if (fd) src_ = make_source(std::move(fd));
  }

  Reply read(fuse_req_t, std::size_t size, off_t off) override {
    SourcePtr src = current();
    if (!src && open_err_) return Reply::error(open_err_);  // EMFILE: say so, never "empty"
    // stdout and stderr appear at their stream's first byte; an empty slot
    // has no log yet: a reader that came early (tail -f) finds them later.
    if (!src) src = reopen(nullptr);
    if (!src) return Reply::data({});
    if (secrets_.empty() && !src->linked) {
      // Nothing to mask: the kernel moves the bytes (no copy in the daemon).
      // Clamped to the size now, so libfuse never reads past the end.
      struct stat st {};
      if (::fstat(src->fd.get(), &st) != 0) return Reply::error(errno);
      if (off >= st.st_size) return Reply::data({});
      return Reply::file(std::shared_ptr<const sup::UniqueFd>(src, &src->fd), off,
                         std::min<std::size_t>(size, static_cast<std::size_t>(st.st_size - off)));
    }
    const off_t lo = std::max<off_t>(0, off - static_cast<off_t>(reach_));
    const std::size_t before = static_cast<std::size_t>(off - lo);
    for (;;) {
      std::string buf(before + size + reach_, '\0');
      const ssize_t n = ::pread(src->fd.get(), buf.data(), buf.size(), lo);
      if (n < 0) return Reply::error(errno);
      // A stream linked to the log got its own file when the other stream
      // wrote; bytes read after that may be the other stream's: read again.
      // (When the new file cannot be opened, what the log holds is served.)
      if (src->linked && replaced(*src))
        if (SourcePtr next = reopen(src)) {
          src = std::move(next);
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
    SourcePtr src = current();
    if (src && src->linked && replaced(*src))
      if (SourcePtr next = reopen(src)) src = std::move(next);
    return src && ::fstat(src->fd.get(), st) == 0;
  }

 private:
  struct Source {
    sup::UniqueFd fd;
    bool linked = false;  // a stream whose file is the log's second name
  };
  using SourcePtr = std::shared_ptr<const Source>;

  SourcePtr make_source(sup::UniqueFd fd) const {
    struct stat st {};
    const bool linked = stream_ && ::fstat(fd.get(), &st) == 0 && st.st_nlink > 1;
    return std::make_shared<const Source>(Source{std::move(fd), linked});
  }
  SourcePtr current() {
    std::lock_guard g(mu_);
    return src_;
  }
  // The monitor renames the stream's own file over the link (relay.cpp).
  bool replaced(const Source& src) const {
    struct stat now {}, ours {};
    return ::stat(path_.c_str(), &now) == 0 && ::fstat(src.fd.get(), &ours) == 0 && now.st_ino != ours.st_ino;
  }
  /// Opens the path anew in place of `seen` (the source the caller used);
  /// when another thread replaced it meanwhile, theirs wins. Null when the
  /// path cannot be opened.
  SourcePtr reopen(const SourcePtr& seen) {
    if (path_.empty()) return nullptr;
    sup::UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return nullptr;
    SourcePtr next = make_source(std::move(fd));
    std::lock_guard g(mu_);
    if (src_ != seen) return src_;
    src_ = next;
    return next;
  }

  const std::string path_;
  const bool stream_;
  const int open_err_;
  const std::vector<std::string> secrets_;  // fixed at open
  std::size_t reach_ = 0;                   // longest secret - 1
  std::mutex mu_;
  SourcePtr src_;  // guarded by mu_ (the pointer; a Source never changes)
};

/// The record has a log but no index: an older build's, whose streams have files of their own.
bool old_stream_files(const sup::CommandStatus& st) {
  struct stat s {};
  return ::stat(st.log_file.c_str(), &s) == 0;
}

}  // namespace

std::string log_path(const Node& node) {
  switch (node.kind) {
    case Kind::stdout_log: return node.record->stdout_file;
    case Kind::stderr_log: return node.record->stderr_file;
    default: return node.record->log_file;
  }
}

std::unique_ptr<Handle> open_log(Filesystem& fs, const Node& node, const OpenRequest& req) {
  // Views with keys, and the logs of any record but one an older build
  // wrote (a log and no index): stream_file.cpp, which also follows the
  // output into the tail past log_max.
  if (!node.keys().empty() || has_index(*node.record) || !old_stream_files(*node.record))
    return open_stream(fs, node, req);
  const std::string path = log_path(node);
  sup::UniqueFd fd(path.empty() ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  const int err = !fd && !path.empty() && errno != ENOENT ? errno : 0;
  const bool stream = node.kind == Kind::stdout_log || node.kind == Kind::stderr_log;
  return std::make_unique<LogHandle>(path, stream, std::move(fd), err, fs.sup().secrets(node.record->bg_id));
}

}  // namespace fsd
