#include "supervisor/error.hpp"

#include <cerrno>
#include <cstring>

namespace sup {

namespace {

// Each Errc once: its own name, the errno it stands for (its name is that
// errno's), and every errno of a failed system call that turns into it.
struct ErrcRow {
  Errc code;
  const char* id;  // the enumerator's own name
  int err;
  const char* name;
  int from[3];  // the errnos of failed calls that turn into it; 0 ends the list
};

constexpr ErrcRow kErrcTable[] = {
    {Errc::invalid_argument, "invalid_argument", EINVAL, "EINVAL", {EINVAL}},
    {Errc::not_found, "not_found", ENOENT, "ENOENT", {ENOENT}},
    {Errc::not_a_directory, "not_a_directory", ENOTDIR, "ENOTDIR", {ENOTDIR}},
    {Errc::permission_denied, "permission_denied", EACCES, "EACCES", {EACCES, EPERM, EISDIR}},
    // Shown as EACCES, but from execve's ENOEXEC (EACCES is permission_denied).
    {Errc::not_a_program, "not_a_program", EACCES, "EACCES", {ENOEXEC}},
    {Errc::already_exists, "already_exists", EEXIST, "EEXIST", {EEXIST, ENOTEMPTY}},
    {Errc::busy, "busy", EBUSY, "EBUSY", {EBUSY}},
    {Errc::too_big, "too_big", E2BIG, "E2BIG", {E2BIG}},
    {Errc::name_too_long, "name_too_long", ENAMETOOLONG, "ENAMETOOLONG", {ENAMETOOLONG}},
    {Errc::try_again, "try_again", EAGAIN, "EAGAIN", {EAGAIN, ENOMEM}},
    {Errc::too_many_files, "too_many_files", EMFILE, "EMFILE", {EMFILE, ENFILE}},
    {Errc::no_such_process, "no_such_process", ESRCH, "ESRCH", {ESRCH}},
    {Errc::io_error, "io_error", EIO, "EIO", {EIO}},
    {Errc::no_space, "no_space", ENOSPC, "ENOSPC", {ENOSPC, EDQUOT}},
    {Errc::interrupted, "interrupted", EINTR, "EINTR", {EINTR}},
    {Errc::timed_out, "timed_out", ETIMEDOUT, "ETIMEDOUT", {ETIMEDOUT}},
    {Errc::broken_pipe, "broken_pipe", EPIPE, "EPIPE", {EPIPE}},
    {Errc::no_data, "no_data", ENODATA, "ENODATA", {ENODATA}},
};

const ErrcRow& row_of(Errc c) {
  for (const ErrcRow& r : kErrcTable)
    if (r.code == c) return r;
  return row_of(Errc::io_error);
}

}  // namespace

Errc errc_from_errno(int err) {
  for (const ErrcRow& r : kErrcTable) {
    for (int f : r.from)
      if (f != 0 && f == err) return r.code;
  }
  return Errc::io_error;
}

Error error_from_errno(int err, const std::string& what) {
  return Error{errc_from_errno(err), what + ": " + std::strerror(err)};
}

const char* error_code_name(Errc c) { return row_of(c).name; }

int errno_of(Errc c) { return row_of(c).err; }

const char* errc_id(Errc c) { return row_of(c).id; }

}  // namespace sup
