#include "supervisor/secrets.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace sup {

std::string mask_secrets(std::string_view text, std::vector<std::string> secrets) {
  std::erase_if(secrets, [](const std::string& s) { return s.empty(); });
  if (secrets.empty()) return std::string(text);
  std::sort(secrets.begin(), secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    bool hit = false;
    for (const auto& s : secrets) {
      if (text.compare(i, s.size(), s) == 0) {
        out += kMask;
        i += s.size();
        hit = true;
        break;
      }
    }
    if (!hit) out += text[i++];
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
  std::vector<bool> covered;
  for (const auto& s : secrets) {
    if (s.empty()) continue;
    for (size_t at = bytes.find(s); at != std::string::npos; at = bytes.find(s, at + 1)) {
      if (covered.empty()) covered.assign(bytes.size(), false);
      std::fill(covered.begin() + static_cast<long>(at), covered.begin() + static_cast<long>(at + s.size()), true);
    }
  }
  for (size_t i = 0; i < covered.size(); ++i)
    if (covered[i]) bytes[i] = '*';
}

std::vector<std::string> request_secrets(std::string_view request) {
  const nlohmann::json j = nlohmann::json::parse(request, nullptr, false);
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains("secretEnv") || !j["secretEnv"].is_object()) return out;
  for (const auto& [key, value] : j["secretEnv"].items()) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) continue;
    out.push_back(value.get<std::string>());
    // As it stands in the request text when it holds a quote, a backslash...
    const std::string quoted = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (quoted.substr(1, quoted.size() - 2) != out.back()) out.push_back(quoted.substr(1, quoted.size() - 2));
  }
  return out;
}

}  // namespace sup
