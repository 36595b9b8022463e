#include "fsd/errno_map.hpp"

#include <cerrno>
#include <cstring>

namespace fsd {

int to_errno(sup::Errc code) {
  switch (code) {
    case sup::Errc::invalid_argument: return EINVAL;
    case sup::Errc::not_found: return ENOENT;
    case sup::Errc::not_a_directory: return ENOTDIR;
    case sup::Errc::permission_denied: return EACCES;
    case sup::Errc::not_a_program: return EACCES;  // sbxfs.5's errno for it; errors says which
    case sup::Errc::already_exists: return EEXIST;
    case sup::Errc::busy: return EBUSY;
    case sup::Errc::too_big: return E2BIG;
    case sup::Errc::name_too_long: return ENAMETOOLONG;
    case sup::Errc::too_many_files: return EMFILE;
    case sup::Errc::try_again: return EAGAIN;
    case sup::Errc::no_such_process: return ESRCH;
    case sup::Errc::io_error: return EIO;
    case sup::Errc::no_space: return ENOSPC;
    case sup::Errc::interrupted: return EINTR;
    case sup::Errc::timed_out: return ETIMEDOUT;
  }
  return EIO;
}

const char* errno_name(int err) {
  const char* name = strerrorname_np(err);  // glibc >= 2.32
  return name ? name : "EIO";
}

}  // namespace fsd
