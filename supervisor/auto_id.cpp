#include "supervisor/auto_id.hpp"

#include <cstdio>

namespace sup {

std::string format_auto_id(std::uint64_t n) {
  char buf[32];
  if (n < 10000) {
    std::snprintf(buf, sizeof buf, "%04llu", static_cast<unsigned long long>(n));
    return buf;
  }
  std::uint64_t block = n / 10000;  // 1 -> 'a'
  std::string prefix;
  while (block > 26) { prefix += 'z'; block -= 26; }
  prefix += static_cast<char>('a' + block - 1);
  std::snprintf(buf, sizeof buf, "%04llu", static_cast<unsigned long long>(n % 10000));
  return prefix + buf;
}

std::optional<std::uint64_t> parse_auto_id(const std::string& id) {
  size_t i = 0;
  std::uint64_t block = 0;
  while (i < id.size() && id[i] >= 'a' && id[i] <= 'z') {
    if (id[i] != 'z' && i + 1 < id.size() && id[i + 1] >= 'a') return std::nullopt;
    block += static_cast<std::uint64_t>(id[i] - 'a' + 1);
    ++i;
  }
  if (id.size() - i != 4) return std::nullopt;
  std::uint64_t n = 0;
  for (; i < id.size(); ++i) {
    if (id[i] < '0' || id[i] > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(id[i] - '0');
  }
  return block * 10000 + n;
}

}  // namespace sup
