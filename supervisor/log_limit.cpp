#include "supervisor/log_limit.hpp"

#include <sys/stat.h>

namespace sup {

std::optional<std::uint64_t> dropped_bytes(const std::string& record_dir) {
  struct stat st {};
  if (::stat((record_dir + "/dropped").c_str(), &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.st_size);
}

}  // namespace sup
