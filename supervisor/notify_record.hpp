#pragma once
// `notified` (FORMAT.md): written by the monitor when the command wrote a
// newline to its notification descriptor (readyFd), read by the supervisor.
// One line: the time, microseconds since the epoch (CLOCK_REALTIME).
#include <cstdint>
#include <optional>
#include <string>

namespace sup {

inline constexpr const char* kNotifiedFile = "notified";

std::string format_notified(std::int64_t time_us);
/// nullopt when the text is no such line (torn: read it again later).
std::optional<std::int64_t> parse_notified(const std::string& text);

}  // namespace sup
