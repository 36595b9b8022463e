#pragma once
// Wall-clock timestamps as the records show them.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sup {

/// Now, as ISO-8601 UTC with milliseconds: 2026-11-29T22:15:47.123Z
std::string iso_now();
/// Milliseconds since the epoch of such a timestamp; nullopt when it is not one.
std::optional<std::int64_t> iso_to_ms(std::string_view iso);
/// Now, in milliseconds since the epoch (the wall clock, as iso_now).
std::int64_t now_ms();

}  // namespace sup
