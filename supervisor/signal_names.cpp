#include "supervisor/signal_names.hpp"

#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace sup {

std::string signal_name(int sig) {
  if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
    if (sig == SIGRTMIN) return "SIGRTMIN";
    if (sig == SIGRTMAX) return "SIGRTMAX";
    return "SIGRTMIN+" + std::to_string(sig - SIGRTMIN);
  }
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "SIG" + std::to_string(sig);
}

namespace {
std::optional<int> parse_number(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}
}  // namespace

std::optional<int> parse_signal(std::string_view text) {
  auto is_space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  if (text.empty() || text.size() > 32) return std::nullopt;
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  std::optional<int> sig;
  if (std::isdigit(static_cast<unsigned char>(s[0]))) {
    sig = parse_number(s);
  } else {
    if (s.rfind("SIG", 0) == 0) s.erase(0, 3);
    if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
      sig = parse_number(s);  // "SIG32": signals without a name, as signal_name() shows them
    } else if (s.rfind("RTMIN", 0) == 0 || s.rfind("RTMAX", 0) == 0) {
      bool min = s[2] == 'M' && s[3] == 'I';
      std::string rest = s.substr(5);
      int off = 0;
      if (!rest.empty()) {
        if (rest[0] != (min ? '+' : '-')) return std::nullopt;
        auto n = parse_number(std::string_view(rest).substr(1));
        if (!n) return std::nullopt;
        off = min ? *n : -*n;
      }
      sig = (min ? SIGRTMIN : SIGRTMAX) + off;
      // Both count within the real-time signals: RTMAX-31 is no name of 33,
      // which the C library keeps for itself (RTMIN-1 is refused likewise).
      if (*sig < SIGRTMIN || *sig > SIGRTMAX) return std::nullopt;
    } else {
      for (int i = 1; i < SIGRTMIN; ++i) {
        const char* a = ::sigabbrev_np(i);
        if (a && s == a) { sig = i; break; }
      }
    }
  }
  if (!sig || *sig < 1 || *sig > SIGRTMAX) return std::nullopt;
  return sig;
}

}  // namespace sup
