#pragma once
// JSON text without a JSON library, for the files the monitor writes (it
// links no more than the C++ standard library).
#include <string>
#include <string_view>

namespace sup {

/// `s` as a JSON string literal, quotes included. Bytes of 0x80 and up are
/// copied as they are (the caller writes UTF-8).
std::string json_quote(std::string_view s);

}  // namespace sup
