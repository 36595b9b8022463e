#pragma once
// The daemon's write end of one command's standard input (a request with
// `stdin: "pipe"`): the FIFO `stdin` in its record folder, which the
// command reads and its monitor holds a write end of (FORMAT.md, "stdin").
// Never blocks: a write takes what the pipe has room for, and the caller
// waits for room elsewhere (the event loop watches fd() for writability).
//
// Thread-safety: write() from any thread; `watching` is the event loop
// thread's alone.
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "supervisor/error.hpp"
#include "supervisor/unique_fd.hpp"

namespace sup {

class StdinPipe {
 public:
  /// Opens DIR/stdin for writing, without blocking. broken_pipe when no one
  /// reads it (ENXIO: the command ended or closed its input) or it is gone
  /// (ENOENT: the input was closed); `id` names the command in the message.
  static Result<std::shared_ptr<StdinPipe>> open(const std::string& record_dir, const std::string& id);

  /// Writes what the pipe takes now of `data`: the bytes written, 0 when it
  /// is full; broken_pipe when no one reads it any more. No SIGPIPE.
  Result<std::size_t> write(std::string_view data) const;
  /// Writes all of `data` now or nothing: the pipe is grown to hold it
  /// beside what the command has not read yet, up to the system's limit
  /// for a pipe (/proc/sys/fs/pipe-max-size). try_again when what is
  /// unread leaves too little room, too_big when `data` alone is over the
  /// limit; broken_pipe as write().
  Result<std::size_t> write_whole(std::string_view data) const;

  int fd() const { return fd_.get(); }

  bool watching = false;  ///< a wait for room is armed on the event loop (its thread only)

  StdinPipe(UniqueFd fd, std::string id) : fd_(std::move(fd)), id_(std::move(id)) {}

 private:
  Result<std::size_t> write_locked(std::string_view data) const;

  UniqueFd fd_;
  std::string id_;  // for the messages
  mutable std::mutex mu_;  // a whole write's room is not taken by another write meanwhile
};

}  // namespace sup
