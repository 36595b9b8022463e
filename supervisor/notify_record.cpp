#include "supervisor/notify_record.hpp"

#include <charconv>

namespace sup {

std::string format_notified(std::int64_t time_us) { return std::to_string(time_us) + "\n"; }

std::optional<std::int64_t> parse_notified(const std::string& text) {
  std::int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p == text.data() || v <= 0 || p == end || *p != '\n') return std::nullopt;
  return v;
}

}  // namespace sup
