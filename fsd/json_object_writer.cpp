#include "fsd/json_object_writer.hpp"

#include <charconv>
#include <cmath>

#include "supervisor/utf8.hpp"

namespace fsd {

namespace {

// The one JSON string writer: what is not valid UTF-8 becomes U+FFFD, or
// with `hex` the four characters \xHH (uppercase) of the byte, counted.
std::size_t quote_text(std::string& out, std::string_view s, bool hex) {
  static constexpr char kHex[] = "0123456789abcdef";
  static constexpr char kHexUpper[] = "0123456789ABCDEF";
  std::size_t invalid = 0;
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    // Most bytes need nothing: append each run of them at once.
    std::size_t plain = i;
    while (plain < s.size()) {
      const auto b = static_cast<unsigned char>(s[plain]);
      if (b < 0x20 || b >= 0x80 || b == '"' || b == '\\') break;
      ++plain;
    }
    if (plain > i) {
      out.append(s.data() + i, plain - i);
      i = plain;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      if (const std::size_t len = sup::utf8_char_len(s, i)) {
        out.append(s.data() + i, len);
        i += len;
      } else if (hex) {
        out += "\\\\x";  // a backslash, escaped
        out += kHexUpper[c >> 4];
        out += kHexUpper[c & 15];
        ++invalid;
        ++i;
      } else {
        out += "\xEF\xBF\xBD";  // U+FFFD
        ++invalid;
        ++i;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
  return invalid;
}

}  // namespace

void JsonObjectWriter::quote(std::string& out, std::string_view s) { quote_text(out, s, false); }

std::size_t JsonObjectWriter::quote_hex_escaped(std::string& out, std::string_view s) {
  return quote_text(out, s, true);
}

void JsonObjectWriter::key(std::string_view k) {
  if (!first_) out_ += ", ";
  first_ = false;
  quote(out_, k);
  out_ += ": ";
}

JsonObjectWriter& JsonObjectWriter::str(std::string_view k, std::string_view value) {
  key(k);
  quote(out_, value);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::raw(std::string_view k, std::string_view json) {
  key(k);
  out_ += json;
  return *this;
}

JsonObjectWriter& JsonObjectWriter::str_or_null(std::string_view k, std::string_view value) {
  if (value.empty()) {
    key(k);
    out_ += "null";
    return *this;
  }
  return str(k, value);
}

JsonObjectWriter& JsonObjectWriter::num(std::string_view k, std::int64_t value) {
  key(k);
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, r.ptr);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::num(std::string_view k, double value) {
  key(k);
  if (!std::isfinite(value)) {  // JSON has no NaN or infinity
    out_ += "null";
    return *this;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, r.ptr);
  return *this;
}

JsonObjectWriter& JsonObjectWriter::num_or_null(std::string_view k, std::optional<std::int64_t> value) {
  if (value) return num(k, *value);
  key(k);
  out_ += "null";
  return *this;
}

JsonObjectWriter& JsonObjectWriter::boolean(std::string_view k, bool value) {
  key(k);
  out_ += value ? "true" : "false";
  return *this;
}

}  // namespace fsd
