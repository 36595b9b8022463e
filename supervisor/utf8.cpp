#include "supervisor/utf8.hpp"

#include <algorithm>

#include <cstdint>
#include <cstdio>

namespace sup {

std::size_t utf8_char_len(std::string_view in, std::size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  const std::size_t n = in.size();
  const unsigned char c = p[i];
  std::size_t len = 0;
  std::uint32_t cp = 0, min = 0;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F, min = 0x80;
  else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F, min = 0x800;
  else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07, min = 0x10000;
  if (len == 0 || i + len > n) return 0;
  for (std::size_t k = 1; k < len; ++k) {
    if ((p[i + k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i + k] & 0x3F);
  }
  if (cp < min || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return len;
}

std::string_view utf8_head(std::string_view text, std::size_t max_bytes, std::size_t max_chars) {
  const auto continuation = [&](std::size_t i) { return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80; };
  std::size_t end = std::min(text.size(), max_bytes);
  while (end > 0 && end < text.size() && continuation(end)) --end;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < end; ++i) {
    if (continuation(i)) continue;
    if (chars++ == max_chars) return text.substr(0, i);
  }
  return text.substr(0, end);
}

bool never_text(std::string_view in) {
  if (in.find('\0') != std::string_view::npos) return true;
  for (std::size_t i = 0; i < in.size();) {
    const std::size_t len = utf8_char_len(in, i);
    if (len == 0) return in.size() - i > 3;  // a character cut by the end of a write may go on
    i += len;
  }
  return false;
}

std::optional<std::string> why_not_text(std::string_view in) {
  for (std::size_t i = 0; i < in.size();) {
    if (in[i] == '\0') return "a NUL byte at offset " + std::to_string(i);
    const std::size_t len = utf8_char_len(in, i);
    if (len == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(in[i]));
      return std::string("byte ") + hex + " at offset " + std::to_string(i) + " is not UTF-8";
    }
    i += len;
  }
  return std::nullopt;
}

std::string_view utf8_tail(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::string_view tail = text.substr(text.size() - max_bytes);
  for (int i = 0; i < 3 && !tail.empty() && (static_cast<unsigned char>(tail.front()) & 0xC0) == 0x80; ++i)
    tail.remove_prefix(1);
  return tail;
}

}  // namespace sup
