#pragma once
// Errors as values: every fallible supervisor call returns Result<T>.
// Exceptions stop at the library's edge. Each Errc's errno and name are in
// one table (error.cpp), used by the records and by the FUSE replies.
#include <string>
#include <utility>
#include <variant>

namespace sup {

enum class Errc {
  invalid_argument,   // EINVAL: malformed spec, bad name, bad signal
  not_found,          // ENOENT: no such command, cwd or executable missing
  not_a_directory,    // ENOTDIR: cwd is not a directory
  permission_denied,  // EACCES: not executable, not allowed
  not_a_program,      // EACCES (from execve's ENOEXEC): executable, but not in a format the kernel runs
  already_exists,     // EEXIST: name taken
  busy,               // EBUSY: the command is running
  too_big,            // E2BIG: request or argument list too large
  name_too_long,      // ENAMETOOLONG: a bgId or path longer than allowed
  try_again,          // EAGAIN: a limit was reached for now
  too_many_files,     // EMFILE: the daemon is out of file descriptors
  no_such_process,    // ESRCH: the command has ended
  io_error,           // EIO: the state directory failed us
  no_space,           // ENOSPC: the state directory's disk is full
  interrupted,        // EINTR: a start was called off before its outcome
  timed_out,          // ETIMEDOUT: the monitor did not report in time
  broken_pipe,        // EPIPE: no one reads the command's input (ended, closed, or never a pipe)
  no_data,            // ENODATA: a record has no such data (an older build's, or output dropped by log_max)
};

struct Error {
  Errc code;
  std::string message;
};

/// The Errc a failed system call's errno turns into (io_error for the rest).
Errc errc_from_errno(int err);
/// Turn the errno of a failed system call into an Error with `what` as context.
Error error_from_errno(int err, const std::string& what);
/// "EINVAL" etc.: the errno name an Errc stands for (shown in records).
const char* error_code_name(Errc c);
/// The errno an Errc stands for (a FUSE reply's).
int errno_of(Errc c);
/// "invalid_argument" etc.: the enumerator's name (for logs and tests).
const char* errc_id(Errc c);

/// A value or an Error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T v) : v_(std::move(v)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

struct Ok {};
using Status = Result<Ok>;

}  // namespace sup
