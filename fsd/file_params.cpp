#include "fsd/file_params.hpp"

#include <algorithm>
#include <limits>

namespace fsd {

namespace {

using B = ParamKey::Bound;
using T = ParamType;

sup::Error bad(std::string message) { return sup::Error{sup::Errc::invalid_argument, std::move(message)}; }

std::string quoted(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '\'';
  out += s;
  out += '\'';
  return out;
}

/// What a key of `row` looks like when given right ("timeoutSec=N", "all").
std::string usage(const ParamKey& k) {
  switch (k.type) {
    case T::flag: return std::string(k.name);
    case T::number: return std::string(k.name) + "=N";
    case T::text: return std::string(k.name) + "=TEXT";
    case T::list: return std::string(k.name) + "=A+B";
  }
  return std::string(k.name);
}

std::string keys_of(const ParamFile& row) {
  std::string out;
  for (const ParamKey& k : row.keys) out += (out.empty() ? "" : ", ") + usage(k);
  return out;
}

std::string range_of(const ParamKey& k, const ParamLimits& limits) {
  std::string r = std::to_string(k.min) + "..";
  const std::int64_t max = k.max_under(limits);
  r += max == std::numeric_limits<std::int64_t>::max() ? std::string("any") : std::to_string(max);
  if (k.bound == B::wait_timeout) r += " (the mount's wait_timeout)";
  if (k.bound == B::log_max) r += " (the mount's log_max)";
  return r;
}

/// Checks one KEY or KEY=VALUE against its row and fills `v`.
sup::Status parse_value(const ParamKey& k, std::string_view key, std::optional<std::string_view> value,
                        const ParamLimits& limits, FileParams::Value& v) {
  v.key = std::string(key);
  v.type = k.type;
  if (k.type == T::flag) {
    if (value) return bad(std::string(key) + " is a flag and takes no value (give '" + std::string(key) + "' alone)");
    return sup::Ok{};
  }
  if (!value) return bad(std::string(key) + " needs a value (" + usage(k) + ")");
  if (value->empty()) return bad(std::string(key) + " has an empty value (" + usage(k) + ")");
  switch (k.type) {
    case T::number: {
      const std::int64_t max = k.max_under(limits);
      if (!std::all_of(value->begin(), value->end(), [](char c) { return c >= '0' && c <= '9'; }))
        return bad(std::string(key) + "=" + std::string(*value) + " is not a whole number (digits only)");
      std::int64_t n = 0;
      for (char c : *value) {
        if (n > (std::numeric_limits<std::int64_t>::max() - (c - '0')) / 10) {
          n = std::numeric_limits<std::int64_t>::max();
          break;
        }
        n = n * 10 + (c - '0');
      }
      if (n < k.min || n > max)
        return bad(std::string(key) + "=" + std::string(*value) + " is out of range: " + range_of(k, limits));
      v.number = n;
      v.text = std::to_string(n);
      return sup::Ok{};
    }
    case T::text:
      v.text = std::string(*value);
      return sup::Ok{};
    case T::list: {
      std::string_view rest = *value;
      for (;;) {
        const std::size_t plus = rest.find('+');
        const std::string_view item = rest.substr(0, plus);
        if (item.empty()) return bad(std::string(key) + "=" + std::string(*value) + " has an empty item (A+B)");
        v.items.emplace_back(item);
        if (plus == std::string_view::npos) break;
        rest.remove_prefix(plus + 1);
      }
      v.text = std::string(*value);
      return sup::Ok{};
    }
    case T::flag: break;
  }
  return sup::Ok{};
}

}  // namespace

std::int64_t ParamKey::max_under(const ParamLimits& limits) const {
  switch (bound) {
    case Bound::fixed: return max;
    case Bound::wait_timeout: return limits.wait_timeout_sec;
    case Bound::log_max: return limits.log_max > 0 ? limits.log_max : std::numeric_limits<std::int64_t>::max();
  }
  return max;
}

std::optional<std::pair<std::string_view, std::string_view>> split_param_name(std::string_view name) {
  const std::size_t comma = name.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  return std::pair{name.substr(0, comma), name.substr(comma + 1)};
}

const FileParams::Value* FileParams::find(std::string_view key) const {
  for (const Value& v : values_)
    if (v.key == key) return &v;
  return nullptr;
}

std::optional<std::int64_t> FileParams::number(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ParamType::number) return std::nullopt;
  return v->number;
}

std::optional<std::string> FileParams::text(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type == ParamType::flag) return std::nullopt;
  return v->text;
}

std::vector<std::string> FileParams::items(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ParamType::list) return {};
  return v->items;
}

sup::Result<FileParams> parse_file_params(std::string_view file, const ParamFile* row, std::string_view keys,
                                          const ParamLimits& limits) {
  if (!row) return bad(quoted(file) + " takes no parameters (got " + quoted(keys) + ")");
  FileParams out;
  out.given_ = std::string(keys);
  std::string_view rest = keys;
  for (;;) {
    const std::size_t comma = rest.find(',');
    const std::string_view part = rest.substr(0, comma);
    const std::size_t eq = part.find('=');
    const std::string_view key = part.substr(0, eq);
    std::optional<std::string_view> value;
    if (eq != std::string_view::npos) value = part.substr(eq + 1);
    if (key.empty())
      return bad("an empty key in " + quoted(keys) + " (keys are comma-separated; " + quoted(file) +
                 " takes " + keys_of(*row) + ")");
    const ParamKey* spec = nullptr;
    for (const ParamKey& k : row->keys)
      if (k.name == key) spec = &k;
    if (!spec)
      return bad("unknown key " + quoted(key) + " (" + quoted(file) + " takes " + keys_of(*row) + "; keys are case-sensitive)");
    if (out.find(key)) return bad(std::string(key) + " is given twice");
    FileParams::Value v;
    if (sup::Status st = parse_value(*spec, key, value, limits, v); !st) return st.error();
    out.values_.push_back(std::move(v));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::sort(out.values_.begin(), out.values_.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
  for (const FileParams::Value& v : out.values_) {
    if (!out.canonical_.empty()) out.canonical_ += ',';
    out.canonical_ += v.key;
    if (v.type != ParamType::flag) out.canonical_ += "=" + v.text;
  }
  return out;
}

}  // namespace fsd
