#include "supervisor/log_limit.hpp"

#include <sys/stat.h>

#include "supervisor/log_index.hpp"

namespace sup {

std::optional<std::uint64_t> dropped_bytes(const std::string& record_dir) {
  struct stat st {};
  if (::stat((record_dir + "/dropped").c_str(), &st) != 0) return std::nullopt;
  // The oldest tail segment says exactly what is gone, even when the
  // monitor was killed before it updated `dropped`; an older build's
  // record (or a moment with no segment) has the count in its size.
  if (const std::optional<std::uint64_t> from_tail = tail_dropped_bytes(record_dir)) return *from_tail;
  return static_cast<std::uint64_t>(st.st_size);
}

}  // namespace sup
