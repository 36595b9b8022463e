// procs/ID/stdout and stderr of a record with an index, and the views with
// parameters of log, stdout and stderr: `,follow` (a read at the end waits
// for more and gets EOF once the command has ended) and `,timestamps`
// (each line prefixed by the time its first byte was read,
// `2026-12-01T07:00:00.123Z `).
//
// stdout and stderr are the chunks of their stream in the log, found
// through the index (supervisor/log_index.hpp): the bytes are in the state
// directory once. A record an older build left has no index but files
// `stdout` and `stderr` of its own: those are read (log_file.cpp), and
// its timestamped views fail with ENODATA.
//
// Secrets are masked byte for byte over a window widened by the longest
// secret on each side (as in log_file.cpp), so a secret split across
// chunks is masked whole.
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "fsd/files.hpp"
#include "fsd/followed_read.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/secrets.hpp"

namespace fsd {

namespace {

enum class Selection { log, out, err };

sup::LogStream stream_of(Selection s) { return s == Selection::err ? sup::LogStream::err : sup::LogStream::out; }

bool in_selection(sup::LogStream s, Selection sel) { return sel == Selection::log || sup::in_stream(s, stream_of(sel)); }

class StreamHandle : public FollowedReadHandle {
 public:
  StreamHandle(Filesystem& fs, const sup::CommandStatus& st, Selection sel, bool follow, bool timestamps)
      : FollowedReadHandle(fs, st, follow), sel_(sel), timestamps_(timestamps),
        secrets_(fs.sup().secrets(st.bg_id)), path_(sel == Selection::log ? st.log_file
                                                   : sel == Selection::out ? st.stdout_file : st.stderr_file) {
    for (const auto& s : secrets_) reach_ = std::max(reach_, s.size() - 1);
  }

  bool fstat(struct stat* st) override {
    std::lock_guard g(mu_);
    if (timestamps_) return false;  // longer than any file: the path's size is a lower bound
    const int err = ensure();
    if (err != 0) return false;
    if (raw_) return ::fstat(raw_.get(), st) == 0;
    if (!index_.is_open() || ::fstat(index_.log_fd(), st) != 0) return false;
    st->st_size = static_cast<off_t>(index_.stream_size(stream_of(sel_)));
    st->st_blocks = (st->st_size + 511) / 512;
    return true;
  }

 protected:
  Reply fetch(std::size_t size, off_t off, bool) override {
    std::lock_guard g(mu_);
    if (int err = ensure()) return Reply::error(err);
    // Nothing to mask and the whole read in one place of the log (or the
    // stream's end there): the kernel moves the bytes (spliced, no copy in
    // the daemon). Never a short read before the end: tools take a short
    // read of a regular file for its end.
    std::uint64_t at = 0, run = 0;
    if (!timestamps_ && !raw_ && sel_ != Selection::log && secrets_.empty() && index_.is_open() &&
        index_.locate(stream_of(sel_), static_cast<std::uint64_t>(off), &at, &run) &&
        (run >= size || static_cast<std::uint64_t>(off) + run >= index_.stream_size(stream_of(sel_)))) {
      if (!log_share_) log_share_ = std::make_shared<const sup::UniqueFd>(::dup(index_.log_fd()));
      if (*log_share_)
        return Reply::file(log_share_, static_cast<off_t>(at), static_cast<std::size_t>(std::min<std::uint64_t>(size, run)));
    }
    std::string out;
    if (int err = timestamps_ ? stamped(static_cast<std::uint64_t>(off), size, &out)
                              : masked(static_cast<std::uint64_t>(off), size, &out))
      return Reply::error(err);
    return Reply::data(std::move(out));
  }

  bool more_at(off_t off, bool) override {
    std::lock_guard g(mu_);
    if (ensure() != 0) return true;  // a read answers the error at once
    if (timestamps_) {
      if (!index_.is_open()) return false;
      return static_cast<std::uint64_t>(off) < text_base_ + text_.size() || next_chunk_ < index_.chunks().size();
    }
    return static_cast<std::uint64_t>(off) < size_now();
  }

 private:
  /// Opens what the view reads, once it exists; 0 when there is nothing yet.
  int ensure() {
    if (raw_) {
      return 0;
    }
    if (index_.is_open()) return index_.refresh();
    if (sel_ == Selection::log && !timestamps_) {
      raw_.reset(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
      return raw_ || errno == ENOENT ? 0 : errno;
    }
    const int err = index_.open(dir_);
    if (err != ENOENT) return err;
    // No index: an older build's record keeps its streams in files of their own.
    struct stat st {};
    const bool old = ::stat(path_.c_str(), &st) == 0 || ::stat((dir_ + "/log").c_str(), &st) == 0;
    if (!old) return 0;  // no output yet
    if (timestamps_) {
      if (!reported_)
        fs_.errors().add("procs/" + id_ + "/" + std::string(path_.substr(path_.rfind('/') + 1)) + ",timestamps",
                         ENODATA, "this record was written by an older sbxfs: it has no index of times", "", id_);
      reported_ = true;
      return ENODATA;
    }
    raw_.reset(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    return raw_ || errno == ENOENT ? 0 : errno;
  }

  std::uint64_t size_now() const {
    if (raw_) {
      struct stat st {};
      return ::fstat(raw_.get(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    }
    if (!index_.is_open()) return 0;
    if (sel_ == Selection::log) {
      struct stat st {};
      return ::fstat(index_.log_fd(), &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    }
    return index_.stream_size(stream_of(sel_));
  }

  /// Bytes of the selection, unmasked.
  int raw_bytes(std::uint64_t off, std::size_t size, std::string* out) const {
    out->clear();
    if (raw_ || sel_ == Selection::log) {
      const int fd = raw_ ? raw_.get() : index_.is_open() ? index_.log_fd() : -1;
      if (fd < 0) return 0;
      out->resize(size);
      ssize_t n;
      do n = ::pread(fd, out->data(), size, static_cast<off_t>(off));
      while (n < 0 && errno == EINTR);
      if (n < 0) return errno;
      out->resize(static_cast<std::size_t>(n));
      return 0;
    }
    if (!index_.is_open()) return 0;
    return index_.read_stream(stream_of(sel_), off, size, out);
  }

  /// Bytes of the selection, masked.
  int masked(std::uint64_t off, std::size_t size, std::string* out) const {
    if (secrets_.empty()) return raw_bytes(off, size, out);
    const std::uint64_t lo = off > reach_ ? off - reach_ : 0;
    const std::size_t before = static_cast<std::size_t>(off - lo);
    if (int err = raw_bytes(lo, before + size + reach_, out)) return err;
    sup::mask_secrets_in_place(*out, secrets_);
    if (out->size() <= before) {
      out->clear();
    } else {
      *out = out->substr(before, size);
    }
    return 0;
  }

  /// The timestamped text at [off, off+size), generated from the chunks
  /// (again from the start when a reader goes back).
  int stamped(std::uint64_t off, std::size_t size, std::string* out) {
    out->clear();
    if (!index_.is_open()) return 0;
    if (off < text_base_) {
      text_.clear();
      text_base_ = 0;
      next_chunk_ = 0;
      sel_off_ = 0;
      line_start_ = true;
    }
    const auto& chunks = index_.chunks();
    while (text_base_ + text_.size() < off + size && next_chunk_ < chunks.size()) {
      // What the reader has passed is dropped: a long log never sits in memory.
      if (off > text_base_) {
        const std::size_t drop = std::min<std::uint64_t>(off - text_base_, text_.size());
        text_.erase(0, drop);
        text_base_ += drop;
      }
      const sup::LogChunk& c = chunks[next_chunk_];
      if (!in_selection(c.stream, sel_)) {
        ++next_chunk_;
        continue;
      }
      const std::uint64_t at = sel_ == Selection::log ? c.offset : sel_off_;
      std::string bytes;
      if (int err = masked(at, c.length, &bytes)) return err;
      if (bytes.size() < c.length) break;  // not all in the log yet
      const std::string stamp = sup::iso_of_us(c.time_us) + " ";
      for (std::size_t i = 0; i < bytes.size();) {
        if (line_start_) text_ += stamp;
        const void* nl = std::memchr(bytes.data() + i, '\n', bytes.size() - i);
        const std::size_t end = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - bytes.data()) + 1 : bytes.size();
        text_.append(bytes, i, end - i);
        line_start_ = nl != nullptr;
        i = end;
      }
      sel_off_ += c.length;
      ++next_chunk_;
    }
    if (off >= text_base_ && off < text_base_ + text_.size())
      *out = text_.substr(static_cast<std::size_t>(off - text_base_), size);
    return 0;
  }

  const Selection sel_;
  const bool timestamps_;
  const std::vector<std::string> secrets_;
  const std::string path_;
  std::size_t reach_ = 0;

  std::mutex mu_;
  // Guarded by mu_:
  sup::LogIndex index_;
  sup::UniqueFd raw_;  // the file read without an index (log, or an old record's stream)
  std::shared_ptr<const sup::UniqueFd> log_share_;  // the log, for spliced replies
  bool reported_ = false;
  std::string text_;            // timestamped text from text_base_
  std::uint64_t text_base_ = 0;
  std::size_t next_chunk_ = 0;  // the next chunk to stamp
  std::uint64_t sel_off_ = 0;   // where it starts in the selection
  bool line_start_ = true;
};

Selection selection_of(Kind k) {
  return k == Kind::stdout_log ? Selection::out : k == Kind::stderr_log ? Selection::err : Selection::log;
}

}  // namespace

bool has_index(const sup::CommandStatus& st) {
  struct stat s {};
  return ::stat((FollowedReadHandle::dir_of(st) + "/index").c_str(), &s) == 0;
}

std::unique_ptr<Handle> open_stream(Filesystem& fs, const Node& node, const OpenRequest&) {
  return std::make_unique<StreamHandle>(fs, *node.record, selection_of(node.kind), node.keys().has("follow"),
                                        node.keys().has("timestamps"));
}

bool stream_attr(const Node& node, struct stat* st) {
  if (node.kind != Kind::stdout_log && node.kind != Kind::stderr_log) return false;
  sup::LogIndex index;
  if (index.open(FollowedReadHandle::dir_of(*node.record)) != 0 || ::fstat(index.log_fd(), st) != 0) return false;
  st->st_size = static_cast<off_t>(index.stream_size(node.kind == Kind::stderr_log ? sup::LogStream::err : sup::LogStream::out));
  st->st_blocks = (st->st_size + 511) / 512;
  return true;
}

}  // namespace fsd
