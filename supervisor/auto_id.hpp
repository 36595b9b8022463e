#pragma once
// Automatic bgIds: "0001".."9999", then "a0000".."z9999", "za0000", ...:
// short, and `ls` lists them in start order.
#include <cstdint>
#include <optional>
#include <string>

namespace sup {

/// The id of automatic number `n` (n >= 1).
std::string format_auto_id(std::uint64_t n);
/// The number of an automatic id; nullopt for any other name.
std::optional<std::uint64_t> parse_auto_id(const std::string& id);

}  // namespace sup
