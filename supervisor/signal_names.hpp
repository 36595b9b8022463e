#pragma once
// Signal numbers <-> names ("SIGTERM").
#include <optional>
#include <string>
#include <string_view>

namespace sup {

/// "SIGTERM" for 15; "SIG<n>" for a number without a name.
std::string signal_name(int sig);
/// Accepts "15", "TERM", "SIGTERM", "sigterm", "RTMIN+2", with surrounding
/// whitespace; nullopt when it names no signal in 1..64.
std::optional<int> parse_signal(std::string_view text);

}  // namespace sup
