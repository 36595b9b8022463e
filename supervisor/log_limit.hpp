#pragma once
// The cap on the output kept per command (log_max) and what the monitor
// reports when it was reached (supervisor/FORMAT.md: `dropped`).
#include <cstdint>
#include <optional>
#include <string>

namespace sup {

/// Default of SupervisorOptions::log_max: 2 GiB, so a 1 GiB capture is untouched.
inline constexpr std::uint64_t kDefaultLogMax = std::uint64_t{2} << 30;

/// Bytes of output the monitor of RECORD_DIR drained and no longer keeps
/// (RECORD_DIR/dropped exists); nullopt when it kept everything.
std::optional<std::uint64_t> dropped_bytes(const std::string& record_dir);

}  // namespace sup
