#include "fsd/errno_map.hpp"

#include <cerrno>
#include <cstring>

namespace fsd {

int to_errno(sup::Errc code) { return sup::errno_of(code); }

const char* errno_name(int err) {
  const char* name = strerrorname_np(err);  // glibc >= 2.32
  return name ? name : "EIO";
}

}  // namespace fsd
