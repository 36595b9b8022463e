#include "supervisor/simple_command.hpp"

#include <algorithm>
#include <iterator>

namespace sup {

namespace {

// dash's built-ins and reserved words (`command -V` of each, dash 0.5.12).
constexpr std::string_view kShellWords[] = {
    "!",        ".",      ":",      "[",     "alias",  "bg",      "break", "case",  "cd",     "chdir",
    "command",  "continue", "do",   "done",  "echo",   "elif",    "else",  "esac",  "eval",   "exec",
    "exit",     "export", "false",  "fc",    "fg",     "fi",      "for",   "getopts", "hash", "if",
    "in",       "jobs",   "kill",   "local", "printf", "pwd",     "read",  "readonly", "return", "set",
    "shift",    "test",   "then",   "times", "trap",   "true",    "type",  "ulimit", "umask", "unalias",
    "unset",    "until",  "wait",   "while"};

// Bytes that mean nothing to the shell outside quotes: no quoting,
// expansion, glob, redirection, separator, comment, tilde, brace or
// reserved-word character. Bytes of multibyte characters are literal to dash.
bool plain(unsigned char c) {
  if (c >= 0x80) return true;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '-': case '_': case '.': case '/': case ':': case ',': case '+': case '@': case '%': case '=':
      return true;
    default:
      return false;
  }
}

bool is_name(std::string_view s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

}  // namespace

std::optional<std::vector<std::string>> simple_command_words(std::string_view text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ' || text[i] == '\t') {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < text.size() && text[end] != ' ' && text[end] != '\t') {
      if (!plain(static_cast<unsigned char>(text[end]))) return std::nullopt;
      ++end;
    }
    words.emplace_back(text.substr(i, end - i));
    i = end;
  }
  if (words.empty()) return std::nullopt;
  const std::string& first = words.front();
  // NAME=VALUE first is an assignment; -x or +x first, dash's own option;
  // a built-in is not the program of that name.
  if (first.find('=') != std::string::npos || first[0] == '-' || first[0] == '+') return std::nullopt;
  if (std::find(std::begin(kShellWords), std::end(kShellWords), first) != std::end(kShellWords)) return std::nullopt;
  return words;
}

std::optional<SimpleEnv> simple_command_env(const std::vector<std::string_view>& env) {
  SimpleEnv out;
  out.kept.reserve(env.size());
  bool has_path = false;
  for (std::size_t i = 0; i < env.size(); ++i) {
    const std::string_view e = env[i];
    const std::size_t eq = e.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = e.substr(0, eq);
    const std::string_view value = e.substr(eq + 1);
    if (!is_name(name)) continue;  // dash does not import it
    if (name == "IFS" || name == "OPTIND" || name == "PPID") return std::nullopt;
    if (name == "PATH") {
      if (value.find('%') != std::string_view::npos) return std::nullopt;
      has_path = !value.empty();
    }
    if (name == "PWD") {
      if (!value.empty() && value[0] == '/') out.pwd = std::string(value);
      continue;
    }
    out.kept.push_back(i);
  }
  if (!has_path) return std::nullopt;
  return out;
}

}  // namespace sup
