#include "supervisor/ready_condition.hpp"

#include <re2/re2.h>

#include <charconv>

#include "supervisor/utf8.hpp"

namespace sup {

namespace {

Error invalid(std::string m) { return Error{Errc::invalid_argument, std::move(m)}; }

Result<int> parse_port(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 1 || v > 65535)
    return invalid("bad port '" + std::string(s.substr(0, 20)) + "': want 1-65535");
  return v;
}

Status check_regex(const std::string& re) {
  if (re.empty()) return invalid("the log pattern is empty");
  RE2::Options o;
  o.set_log_errors(false);
  RE2 compiled(re, o);
  if (!compiled.ok()) return invalid("bad regular expression: " + compiled.error());
  return Ok{};
}

Status check_path(const std::string& p) {
  if (p.empty() || p[0] != '/') return invalid("the http path must start with '/'");
  for (unsigned char c : p)
    if (c <= ' ' || c == 0x7f) return invalid("the http path may not hold spaces or control characters");
  return Ok{};
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

nlohmann::json ReadyCondition::to_json() const {
  switch (kind) {
    case Kind::port: return {{"readyPort", port}};
    case Kind::log: return {{"readyLog", regex}};
    case Kind::http: return {{"readyHttp", path}, {"readyPort", port}};
  }
  return {};
}

std::string ReadyCondition::describe() const {
  switch (kind) {
    case Kind::port: return "port " + std::to_string(port);
    case Kind::log: return "log " + regex;
    case Kind::http: return "http " + std::to_string(port) + " " + path;
  }
  return {};
}

Result<std::optional<ReadyCondition>> ready_condition_from_json(const nlohmann::json& j) {
  const bool has_port = j.contains("readyPort"), has_log = j.contains("readyLog"), has_http = j.contains("readyHttp");
  if (!has_port && !has_log && !has_http) return std::optional<ReadyCondition>{};
  ReadyCondition c;
  if (has_log && (has_port || has_http)) return invalid("give readyLog alone, or readyPort (with readyHttp)");
  if (has_port) {
    const auto& p = j["readyPort"];
    if (!p.is_number_integer()) return invalid("'readyPort' must be an integer");
    auto v = p.get<long long>();
    if (v < 1 || v > 65535) return invalid("'readyPort' must be 1-65535");
    c.port = static_cast<int>(v);
    c.kind = ReadyCondition::Kind::port;
  }
  if (has_http) {
    if (!has_port) return invalid("'readyHttp' needs 'readyPort'");
    if (!j["readyHttp"].is_string()) return invalid("'readyHttp' must be a string");
    c.path = j["readyHttp"].get<std::string>();
    if (auto st = check_path(c.path); !st) return st.error();
    c.kind = ReadyCondition::Kind::http;
  }
  if (has_log) {
    if (!j["readyLog"].is_string()) return invalid("'readyLog' must be a string");
    c.regex = j["readyLog"].get<std::string>();
    if (auto st = check_regex(c.regex); !st) return st.error();
    c.kind = ReadyCondition::Kind::log;
  }
  return std::optional<ReadyCondition>(c);
}

Result<ReadyCondition> parse_ready_condition(std::string_view text) {
  // Each write is a condition: a longer line, which stdio and the kernel
  // pass on in pieces of 4096 bytes or more, is refused at its first piece.
  if (text.size() > kMaxConditionBytes)
    return Error{Errc::too_big, "a condition is at most " + std::to_string(kMaxConditionBytes) + " bytes"};
  text = trim(text);
  if (text.empty()) return invalid("empty condition: write 'port N', 'log REGEX' or 'http N /PATH'");
  if (auto why = why_not_text(text)) return invalid("the condition is not text: " + *why);
  if (text.front() == '{') {
    auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) return invalid("malformed JSON condition");
    for (auto& [k, v] : j.items())
      if (k != "readyPort" && k != "readyLog" && k != "readyHttp")
        return invalid("unknown key '" + k + "' (known: readyPort readyLog readyHttp)");
    auto c = ready_condition_from_json(j);
    if (!c) return c.error();
    if (!c.value()) return invalid("no condition given");
    return *c.value();
  }
  auto sp = text.find_first_of(" \t");
  std::string_view word = text.substr(0, sp);
  std::string_view rest = sp == std::string_view::npos ? std::string_view{} : trim(text.substr(sp));
  ReadyCondition c;
  if (word == "port") {
    auto p = parse_port(rest);
    if (!p) return p.error();
    c.kind = ReadyCondition::Kind::port;
    c.port = p.value();
  } else if (word == "log") {
    c.kind = ReadyCondition::Kind::log;
    c.regex = std::string(rest);
    if (auto st = check_regex(c.regex); !st) return st.error();
  } else if (word == "http") {
    auto sp2 = rest.find_first_of(" \t");
    auto p = parse_port(rest.substr(0, sp2));
    if (!p) return p.error();
    c.kind = ReadyCondition::Kind::http;
    c.port = p.value();
    c.path = sp2 == std::string_view::npos ? "/" : std::string(trim(rest.substr(sp2)));
    if (auto st = check_path(c.path); !st) return st.error();
  } else {
    return invalid("unknown condition '" + std::string(word.substr(0, 20)) + "': write 'port N', 'log REGEX' or 'http N /PATH'");
  }
  return c;
}

}  // namespace sup
