#pragma once
// Writes one flat JSON object on one line straight into a string: for
// listings of thousands of records (status.json,all), where building a
// nlohmann::json object per record and dumping it was most of the time.
// Strings are escaped as JSON requires; bytes that are not valid UTF-8
// become U+FFFD, as dump_json() does.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fsd {

class JsonObjectWriter {
 public:
  /// Appends to `out`; the object is open until close().
  explicit JsonObjectWriter(std::string& out) : out_(out) { out_ += '{'; }
  /// Appends more fields of an object begun elsewhere (with at least one field).
  struct More {};
  JsonObjectWriter(std::string& out, More) : out_(out), first_(false) {}

  JsonObjectWriter& str(std::string_view key, std::string_view value);
  /// A string, or null when it is empty.
  JsonObjectWriter& str_or_null(std::string_view key, std::string_view value);
  JsonObjectWriter& num(std::string_view key, std::int64_t value);
  JsonObjectWriter& num(std::string_view key, double value);
  JsonObjectWriter& num_or_null(std::string_view key, std::optional<std::int64_t> value);
  JsonObjectWriter& boolean(std::string_view key, bool value);
  /// A value given as JSON text (a nested object written by another writer).
  JsonObjectWriter& raw(std::string_view key, std::string_view json);
  void close() { out_ += '}'; }

  /// `s` as a JSON string, quotes included, appended to `out`.
  static void quote(std::string& out, std::string_view s);
  /// The same, but each byte that is not part of valid UTF-8 becomes the
  /// four characters \xHH (uppercase hex) of the text; returns how many.
  static std::size_t quote_hex_escaped(std::string& out, std::string_view s);

 private:
  void key(std::string_view k);

  std::string& out_;
  bool first_ = true;
};

}  // namespace fsd
