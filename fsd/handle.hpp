#pragma once
// An open file of the tree (what fi->fh points to) and the answer a handler
// gives back to the dispatcher.
//
// Thread-safety: the kernel may send reads and writes on one open file from
// several threads at once; a handle with mutable state locks it itself.
// Lifetime: created by open, deleted by release. The kernel sends no release
// while a read or write on the file is still unanswered, so a parked request
// may refer to its handle until it is answered. A handle opened for a rename
// over the file (a write and a close) is kept by that request's route until
// the rename is answered, which comes after every answer of the handle's.
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <string_view>
#include <sys/types.h>

#include <fuse_lowlevel.h>

#include "supervisor/error.hpp"
#include "supervisor/unique_fd.hpp"

namespace fsd {

/// What to send for a request: bytes, a range of an open file, a write
/// count, an errno, poll events, or nothing because the handler parked the
/// request (someone replies later).
class Reply {
 public:
  enum class Type { error, data, file, written, poll, parked };

  static Reply error(int err) { return Reply(Type::error, err); }
  /// A refusal with the supervisor's code; its errno is taken when sent (errno_map).
  static Reply fail(const sup::Error& e) {
    Reply r(Type::error);
    r.code_ = e.code;
    return r;
  }
  static Reply data(std::string bytes) { Reply r(Type::data); r.bytes_ = std::move(bytes); return r; }
  /// `bytes[off, off+size)`, empty past the end: reads served from a snapshot.
  static Reply slice(std::string_view bytes, off_t off, std::size_t size);
  /// A range of a file: `size` bytes from `off`.
  struct Piece {
    off_t off = 0;
    std::size_t size = 0;
  };
  /// `size` bytes of `*fd` from `off`, sent without copying them through the
  /// daemon (spliced when the kernel allows). The reply holds a share of the
  /// descriptor, so it stays open until sent, whatever its handle does meanwhile.
  static Reply file(std::shared_ptr<const sup::UniqueFd> fd, off_t off, std::size_t size) {
    return file(std::move(fd), std::vector<Piece>{{off, size}});
  }
  /// The pieces of `*fd` one after another, as one reply (a stream's bytes
  /// that lie in several places of the log), spliced the same way.
  static Reply file(std::shared_ptr<const sup::UniqueFd> fd, std::vector<Piece> pieces) {
    Reply r(Type::file, fd->get());
    r.file_ = std::move(fd);
    for (const Piece& p : pieces) r.count_ += p.size;
    r.off_ = pieces.empty() ? 0 : pieces.front().off;
    r.pieces_ = std::move(pieces);
    return r;
  }
  static Reply written(std::size_t n) { Reply r(Type::written); r.count_ = n; return r; }
  static Reply poll(unsigned revents) { Reply r(Type::poll); r.count_ = revents; return r; }
  static Reply parked() { return Reply(Type::parked); }

  Type type() const { return type_; }
  /// Type::error: the errno (0: success).
  int err() const;
  int fd() const { return err_; }  ///< Type::file
  off_t offset() const { return off_; }
  const std::vector<Piece>& pieces() const { return pieces_; }  ///< Type::file
  const std::string& bytes() const { return bytes_; }
  std::size_t count() const { return count_; }

 private:
  explicit Reply(Type t, int err = 0) : type_(t), err_(err) {}
  Type type_;
  int err_ = 0;  // the errno, or the fd of Type::file
  std::optional<sup::Errc> code_;  // Type::error from fail(): err_ is its errno
  off_t off_ = 0;
  std::string bytes_;
  std::size_t count_ = 0;
  std::shared_ptr<const sup::UniqueFd> file_;  // Type::file: keeps err_ open
  std::vector<Piece> pieces_;                   // Type::file: what of it, in order
};

/// Sends `r` for `req` (does nothing for a parked reply). Any thread.
/// When a route is set for `req` (route_replies), `r` goes to it instead.
void send_reply(fuse_req_t req, const Reply& r);

/// Where the next reply for `req` goes instead of the kernel: for a request
/// that is answered by other files' operations (a rename that is a write and
/// a close), any of which may be parked and answered later on another
/// thread. The route gets the next non-parked reply sent for `req`, once; to
/// get the one after it, it sets a route again before it calls the next
/// operation. It answers `req` itself in the end. Any thread.
using ReplyRoute = std::function<void(const Reply&)>;
void route_replies(fuse_req_t req, ReplyRoute next);

class Handle {
 public:
  virtual ~Handle() = default;
  virtual Reply read(fuse_req_t req, std::size_t size, off_t off);
  /// Whether a read now would block (a non-blocking read then gets EAGAIN).
  virtual bool would_block() { return false; }
  virtual Reply write(fuse_req_t req, std::string_view data, off_t off);
  /// A write from a descriptor with O_NONBLOCK: where write() would wait,
  /// it answers at once (EAGAIN, or the bytes taken so far). Default: write().
  virtual Reply write_nonblocking(fuse_req_t req, std::string_view data, off_t off) { return write(req, data, off); }
  /// A rename's write of a scratch file's whole content: the kernel holds
  /// both folders locked until it is answered, so it must not wait on a
  /// command's pace (it may on the daemon's: a start, a stop's grace).
  /// All of `data` or an errno. Default: write().
  virtual Reply write_whole(fuse_req_t req, std::string_view data) { return write(req, data, 0); }
  /// close() of one descriptor: Reply::error(0) for success, an errno for
  /// what close() returns, or parked (someone replies later, e.g. a start
  /// that completes at close).
  virtual Reply flush(fuse_req_t req);
  /// The release of the open file (after its last close; asynchronous: no
  /// process waits for it, and it carries no requester). Default: nothing.
  virtual Reply release(fuse_req_t req);
  /// Default: always ready for what was asked (like a regular file).
  virtual Reply poll(fuse_req_t req, fuse_pollhandle* ph, unsigned events);
  /// st_size and mtime of what this handle reads, when it knows better than the path
  /// (a log opened before its command was restarted). False: use the path.
  virtual bool fstat(struct stat* st);

  /// Its close is the one close of a whole write (a rename's): what else
  /// the closer holds open on the file does not make it a close of one
  /// descriptor among several.
  void close_as_one() { closed_as_one_ = true; }

 protected:
  bool closed_as_one_ = false;
};

}  // namespace fsd
