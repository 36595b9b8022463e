#pragma once
// UTF-8 validity, for requests (which must be text) and for views that
// escape what is not text.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sup {

/// The length (1-4) of the valid UTF-8 character at in[i], or 0 when the
/// byte there starts none: a stray continuation byte, a truncated sequence,
/// an overlong form, a UTF-16 surrogate or a code point past U+10FFFF.
std::size_t utf8_char_len(std::string_view in, std::size_t i);

/// The longest prefix of `text` of at most `max_bytes` bytes and at most
/// `max_chars` characters that ends where a character starts, so a cut
/// never splits one. A character is counted by its first byte (any byte but
/// a continuation byte, 10xxxxxx), so text that is not UTF-8 is cut too.
std::string_view utf8_head(std::string_view text, std::size_t max_bytes,
                           std::size_t max_chars = std::string_view::npos);

/// The longest suffix of `text` of at most `max_bytes` bytes that starts
/// where a character starts (up to 3 continuation bytes, 10xxxxxx, left
/// out), so a cut from the end never splits one either.
std::string_view utf8_tail(std::string_view text, std::size_t max_bytes);

/// Whether more bytes appended to `in` cannot make it text: it holds a NUL
/// or a byte that is not UTF-8 (short of a character cut at its end).
bool never_text(std::string_view in);

/// Why `in` is not text: "a NUL byte at offset N" or "byte 0xff at offset
/// N is not UTF-8"; nullopt when it is valid UTF-8 without a NUL.
std::optional<std::string> why_not_text(std::string_view in);

}  // namespace sup
