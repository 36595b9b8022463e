#include "supervisor/secrets.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "supervisor/utf8.hpp"

namespace sup {

std::vector<bool> covered_bytes(std::string_view text, const std::vector<std::string>& secrets) {
  std::vector<bool> covered;
  for (const auto& s : secrets) {
    if (s.empty()) continue;
    for (size_t at = text.find(s); at != std::string_view::npos; at = text.find(s, at + 1)) {
      if (covered.empty()) covered.assign(text.size(), false);
      std::fill(covered.begin() + static_cast<long>(at), covered.begin() + static_cast<long>(at + s.size()), true);
    }
  }
  return covered;
}

std::string mask_secrets(std::string_view text, const std::vector<std::string>& secrets) {
  return mask_secrets_end(text, secrets, text.size());
}

std::string mask_secrets_end(std::string_view text, const std::vector<std::string>& secrets, std::size_t max) {
  const std::vector<bool> covered = covered_bytes(text, secrets);
  const std::size_t from = text.size() - utf8_tail(text, max).size();  // not inside a character
  if (covered.empty()) return std::string(text.substr(from));
  std::string out;
  out.reserve(text.size() - from);
  for (std::size_t i = from; i < text.size();) {
    if (!covered[i]) {
      out += text[i++];
      continue;
    }
    out += kMask;  // one mask for a run of covered bytes, whatever made it
    while (i < text.size() && covered[i]) ++i;
  }
  return out;
}

std::string mask_secrets_in_json(std::string_view text, const std::vector<std::string>& secrets) {
  using nlohmann::json;
  if (std::all_of(secrets.begin(), secrets.end(), [](const std::string& s) { return s.empty(); }))
    return std::string(text);
  if (json::parse(text, nullptr, false).is_discarded()) return mask_secrets(text, secrets);
  // Valid JSON: a quote is a string's first or last byte, nothing else.
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t open = text.find('"', i);
    if (open == std::string_view::npos) break;
    std::size_t close = open + 1;
    while (close < text.size() && text[close] != '"') close += text[close] == '\\' ? 2 : 1;
    if (close >= text.size()) break;
    out.append(text.substr(i, open - i));
    const std::string_view token = text.substr(open, close + 1 - open);
    const json value = json::parse(token, nullptr, false);
    const std::string* decoded = value.is_string() ? &value.get_ref<const std::string&>() : nullptr;
    const std::string masked = decoded ? mask_secrets(*decoded, secrets) : std::string();
    if (decoded && masked != *decoded)
      out += json(masked).dump(-1, ' ', false, json::error_handler_t::replace);
    else
      out.append(token);
    i = close + 1;
  }
  out.append(text.substr(std::min(i, text.size())));
  return mask_secrets(out, secrets);
}

void mask_secrets_in_place(std::string& bytes, const std::vector<std::string>& secrets) {
  const std::vector<bool> covered = covered_bytes(bytes, secrets);
  for (size_t i = 0; i < covered.size(); ++i)
    if (covered[i]) bytes[i] = '*';
}

std::size_t secret_reach(const std::vector<std::string>& secrets) {
  std::size_t longest = 0;
  for (const std::string& s : secrets) longest = std::max(longest, s.size());
  return longest > 0 ? longest - 1 : 0;
}

std::size_t secret_start_at_end(std::string_view bytes, const std::vector<std::string>& secrets, std::size_t blind) {
  // Bytes a whole secret covers are masked, whatever follows: never held
  // (cut off, a secret whose end repeats its beginning would show unmasked).
  const std::vector<bool> covered = covered_bytes(bytes, secrets);
  std::size_t open = 0;  // the bytes at the end that no secret covers
  while (open < bytes.size() && (covered.empty() || !covered[bytes.size() - 1 - open])) ++open;
  const std::size_t line = bytes.size() - (bytes.rfind('\n') == std::string_view::npos ? 0 : bytes.rfind('\n') + 1);
  std::size_t held = std::min({blind, open, line});
  for (const std::string& s : secrets)
    for (std::size_t k = std::min(s.size() - (s.empty() ? 0 : 1), open); k > held; --k)
      if (bytes.compare(bytes.size() - k, k, s, 0, k) == 0) {
        held = k;
        break;
      }
  return held;
}

std::size_t secret_part_at_cut(std::string_view bytes, const std::vector<std::string>& secrets, std::size_t blind,
                               bool at_start) {
  const std::size_t nl = at_start ? bytes.find('\n') : bytes.rfind('\n');
  const std::size_t line = nl == std::string_view::npos ? bytes.size() : at_start ? nl : bytes.size() - 1 - nl;
  std::size_t part = std::min(blind, line);
  for (const std::string& s : secrets)
    for (std::size_t k = std::min(s.empty() ? 0 : s.size() - 1, bytes.size()); k > part; --k)
      if (at_start ? bytes.compare(0, k, s, s.size() - k, k) == 0 : bytes.compare(bytes.size() - k, k, s, 0, k) == 0) {
        part = k;
        break;
      }
  return part;
}

std::vector<std::string> request_secrets(std::string_view request) {
  using nlohmann::json;
  // Every string under a top-level "secretEnv", as the parser meets it: a
  // key given twice keeps only its last value in the parsed object, and a
  // request that stops parsing part way has said its secrets before that.
  std::vector<std::string> out;
  auto keep = [&out](const json& value) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) return;
    out.push_back(value.get<std::string>());
    // As it stands in the request text when it holds a quote, a backslash...
    const std::string quoted = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (quoted.substr(1, quoted.size() - 2) != out.back()) out.push_back(quoted.substr(1, quoted.size() - 2));
  };
  bool named = false;  // the last top-level key was "secretEnv"
  bool inside = false;  // within its object (or array)
  [[maybe_unused]] const json whole = json::parse(  // read for its callback
      request,
      [&](int depth, json::parse_event_t ev, json& parsed) {
        if (depth == 1 && ev == json::parse_event_t::key) {
          named = parsed.is_string() && parsed.get_ref<const std::string&>() == "secretEnv";
        } else if (depth == 1 && named && (ev == json::parse_event_t::object_start || ev == json::parse_event_t::array_start)) {
          inside = true;
          named = false;
        } else if (depth == 1 && (ev == json::parse_event_t::object_end || ev == json::parse_event_t::array_end)) {
          inside = false;
        } else if (ev == json::parse_event_t::value && (inside || (depth == 1 && named))) {
          keep(parsed);
          if (depth == 1) named = false;
        }
        return true;
      },
      false);
  return out;
}

}  // namespace sup
