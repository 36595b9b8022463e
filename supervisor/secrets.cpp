#include "supervisor/secrets.hpp"

#include <algorithm>

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

}  // namespace sup
