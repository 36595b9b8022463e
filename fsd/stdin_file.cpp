// procs/ID/stdin: what is written goes to the command's standard input (a
// request with "stdin": "pipe"). A write returns once all its bytes are in
// the pipe. While the pipe is full the write is parked (FollowRequests),
// holding no FUSE worker, and tried again when the pipe has room; an
// interrupt answers at once: EINTR when none of its bytes went in yet, else
// how many did. A write to a command that has ended or closed its stdin,
// whose input was closed, or that has no pipe is EPIPE with a line in
// `errors` (one still queued: ESRCH, as its signal); the bytes themselves are never shown or logged (they may be
// secrets), only their count. A writer with O_NONBLOCK never waits: it
// gets what fitted, or EAGAIN when the pipe is full, as with a pipe. A
// scratch file renamed over it never waits either (the rename holds its
// folders locked): all of it goes in at once, or nothing. The same bytes
// refused again for the same reason on the same open file (Python's
// buffered writer writes them again at close) add no second line.
//
// procs/ID/stdin,eof: written the same way, and its close closes the
// input: the command reads EOF after what was written (`: > stdin,eof`
// closes it alone). The close that counts is the writer's last (FUSE flush
// when no descriptor of that process refers to the file any more: shells
// flush once before they write). Closing plain `stdin` never closes the
// input, so writers can take turns.
#include <cerrno>
#include <memory>
#include <optional>
#include <string>

#include "fsd/files.hpp"
#include "fsd/open_elsewhere.hpp"
#include "fsd/opener_process.hpp"
#include "fsd/record_handle.hpp"
#include "fsd/refusal_memory.hpp"

namespace fsd {

namespace {

/// What `errors` shows of a write's input: never the bytes (they may be secrets).
std::string not_shown(std::size_t size) { return "(" + std::to_string(size) + " bytes of input, not shown)"; }

/// One write on its way into the pipe, shared by its tries and its
/// interrupt (FollowRequests runs them under one lock).
class PendingWrite {
 public:
  /// `refusals`: of the open file written to, which outlives its writes.
  PendingWrite(Filesystem& fs, RefusalMemory& refusals, std::string id, std::string path, std::size_t size)
      : fs_(fs), refusals_(refusals), id_(std::move(id)), path_(std::move(path)), size_(size) {}

  /// Writes `rest` (the write's bytes from written() on) as far as the pipe
  /// takes them: the answer once every byte is in (or the input is gone),
  /// nullopt while the pipe is full.
  std::optional<Reply> attempt(std::string_view rest) {
    while (!rest.empty()) {
      const sup::Result<std::size_t> n = fs_.sup().write_stdin(id_, rest);
      if (!n) {
        // What went in stays in; the next write learns the input is gone.
        if (written_ > 0) return Reply::written(written_);
        refusals_.add(fs_.errors(), path_, n.error().code, n.error().message, not_shown(size_), id_, rest);
        return Reply::fail(n.error());
      }
      if (*n == 0) return std::nullopt;
      written_ += *n;
      rest.remove_prefix(*n);
    }
    refusals_.forget();
    return Reply::written(written_);
  }
  /// A try of a parked write, on what keep() kept.
  std::optional<Reply> attempt() { return attempt(std::string_view(kept_).substr(written_ - kept_from_)); }
  /// Copies what is left of the write's `data` (the request's buffer is gone once its handler returns).
  void keep(std::string_view data) {
    kept_from_ = written_;
    kept_ = std::string(data.substr(written_));
  }

  Reply interrupted() const { return written_ > 0 ? Reply::written(written_) : Reply::error(EINTR); }
  /// For a writer that does not wait: what went in, or EAGAIN.
  Reply taken() const { return written_ > 0 ? Reply::written(written_) : Reply::error(EAGAIN); }

 private:
  Filesystem& fs_;
  RefusalMemory& refusals_;
  const std::string id_;
  const std::string path_;
  const std::size_t size_;       // the write's bytes
  std::size_t written_ = 0;      // of them in the pipe
  std::string kept_;             // the write's bytes from kept_from_ on
  std::size_t kept_from_ = 0;
};

class StdinHandle : public RecordHandle {
 public:
  StdinHandle(Filesystem& fs, const Node& node, bool eof, pid_t opener)
      : RecordHandle(fs, node, eof ? "stdin,eof" : "stdin"), ino_(node.ino), eof_(eof), opener_(opener) {}

  Reply write(fuse_req_t req, std::string_view data, off_t) override {
    if (std::optional<Reply> gone = removed_since_open()) return *gone;
    auto w = std::make_shared<PendingWrite>(fs_, refusals_, id_, path_, data.size());
    if (std::optional<Reply> now = w->attempt(data)) return *now;
    w->keep(data);
    fs_.follows().park(
        req, id_, [w] { return w->attempt(); }, [w] { return w->interrupted(); });
    return Reply::parked();
  }

  /// As a pipe's: what fits goes in, EAGAIN when nothing does.
  Reply write_nonblocking(fuse_req_t, std::string_view data, off_t) override {
    if (std::optional<Reply> gone = removed_since_open()) return *gone;
    PendingWrite w(fs_, refusals_, id_, path_, data.size());
    if (std::optional<Reply> now = w.attempt(data)) return *now;
    return w.taken();
  }

  /// At once, all or nothing: the pipe grows to hold it (up to the
  /// system's limit), else EAGAIN (unread input in the way) or E2BIG.
  Reply write_whole(fuse_req_t, std::string_view data) override {
    if (std::optional<Reply> gone = removed_since_open()) return *gone;
    const sup::Result<std::size_t> n = fs_.sup().write_stdin_whole(id_, data);
    if (!n) {
      refusals_.add(fs_.errors(), path_, n.error().code, n.error().message, not_shown(data.size()), id_, data);
      return Reply::fail(n.error());
    }
    refusals_.forget();
    return Reply::written(*n);
  }

  Reply flush(fuse_req_t req) override {
    // A child's close of the copy it inherited leaves the input open.
    const pid_t closer = fuse_req_ctx(req)->pid;
    if (!eof_ || !opener_.includes(closer) || (!closed_as_one_ && open_elsewhere(closer, "/" + path_, ino_)))
      return Reply::error(0);
    if (std::optional<Reply> gone = removed_since_open()) return *gone;
    const sup::Status st = fs_.sup().close_stdin(id_);
    if (!st) {
      refusals_.add(fs_.errors(), path_, st.error().code, st.error().message, "(close)", id_, "");
      return Reply::fail(st.error());
    }
    return Reply::error(0);
  }

 private:
  const fuse_ino_t ino_;
  const bool eof_;  // stdin,eof: the last close closes the input
  const OpenerProcess opener_;  // whose close that is
  RefusalMemory refusals_;
};

}  // namespace

std::unique_ptr<Handle> open_stdin(Filesystem& fs, const Node& node, const OpenRequest& req) {
  return std::make_unique<StdinHandle>(fs, node, node.keys().has("eof"), req.who.pid);
}

}  // namespace fsd
