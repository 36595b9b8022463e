#pragma once
// Masking of secret values in anything shown to a reader.
#include <string>
#include <string_view>
#include <vector>

namespace sup {

inline constexpr std::string_view kMask = "****";

/// Replaces every occurrence of every non-empty secret in `text` with "****"
/// (longest secrets first, so one that contains another is masked whole).
std::string mask_secrets(std::string_view text, std::vector<std::string> secrets);

}  // namespace sup
