#include "supervisor/error.hpp"

#include <cerrno>
#include <cstring>

namespace sup {

Error error_from_errno(int err, const std::string& what) {
  Errc c = Errc::io_error;
  switch (err) {
    case ENOENT: c = Errc::not_found; break;
    case ENOTDIR: c = Errc::not_a_directory; break;
    case EACCES: case EPERM: case EISDIR: c = Errc::permission_denied; break;
    case ENOEXEC: c = Errc::not_a_program; break;
    case EEXIST: case ENOTEMPTY: c = Errc::already_exists; break;
    case EBUSY: c = Errc::busy; break;
    case E2BIG: c = Errc::too_big; break;
    case ENAMETOOLONG: c = Errc::name_too_long; break;
    case EMFILE: case ENFILE: c = Errc::too_many_files; break;
    case EAGAIN: case ENOMEM: c = Errc::try_again; break;
    case ESRCH: c = Errc::no_such_process; break;
    case ENOSPC: case EDQUOT: c = Errc::no_space; break;
    case EINVAL: c = Errc::invalid_argument; break;
    case EINTR: c = Errc::interrupted; break;
    case ETIMEDOUT: c = Errc::timed_out; break;
    default: break;
  }
  return Error{c, what + ": " + std::strerror(err)};
}

}  // namespace sup

namespace sup {
const char* error_code_name(Errc c) {
  switch (c) {
    case Errc::invalid_argument: return "EINVAL";
    case Errc::not_found: return "ENOENT";
    case Errc::not_a_directory: return "ENOTDIR";
    case Errc::permission_denied: return "EACCES";
    case Errc::not_a_program: return "EACCES";
    case Errc::already_exists: return "EEXIST";
    case Errc::busy: return "EBUSY";
    case Errc::too_big: return "E2BIG";
    case Errc::name_too_long: return "ENAMETOOLONG";
    case Errc::too_many_files: return "EMFILE";
    case Errc::try_again: return "EAGAIN";
    case Errc::no_such_process: return "ESRCH";
    case Errc::io_error: return "EIO";
    case Errc::no_space: return "ENOSPC";
    case Errc::interrupted: return "EINTR";
    case Errc::timed_out: return "ETIMEDOUT";
  }
  return "EIO";
}
}  // namespace sup
