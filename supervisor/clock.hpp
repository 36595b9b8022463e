#pragma once
// Wall-clock timestamps as the records show them.
#include <string>

namespace sup {

/// Now, as ISO-8601 UTC with milliseconds: 2026-11-29T22:15:47.123Z
std::string iso_now();

}  // namespace sup
