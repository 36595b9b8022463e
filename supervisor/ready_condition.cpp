#include "supervisor/ready_condition.hpp"

#include <re2/re2.h>

#include <charconv>

#include "supervisor/strict_json.hpp"
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

// Its errors name the key (the text form's `log` is readyLog), as every
// other key's do: the same message for a request, a write and a file name.
Status check_regex(const std::string& re) {
  if (re.empty()) return invalid("'readyLog': the log pattern is empty");
  RE2::Options o;
  o.set_log_errors(false);
  RE2 compiled(re, o);
  if (!compiled.ok()) return invalid("'readyLog': bad regular expression: " + compiled.error());
  // Matching is linear in the output, times the program's size: past this
  // one a pattern such as .{1000}.{1000}b costs seconds a megabyte, and its
  // search holds the other conditions of the command behind it.
  if (compiled.ProgramSize() > kMaxLogPatternSize)
    return invalid("'readyLog': the log pattern is too complex: " + std::to_string(compiled.ProgramSize()) +
                   " instructions, at most " + std::to_string(kMaxLogPatternSize) +
                   " (a counted repetition of any character, .{N}, takes 8 per character)");
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
  nlohmann::json j;
  switch (kind) {
    case Kind::port: j = {{"readyPort", port}}; break;
    case Kind::log:
      j = {{"readyLog", regex}};
      if (stream != Stream::both) j["readyLogStream"] = stream == Stream::out ? "stdout" : "stderr";
      break;
    case Kind::http:
      j = {{"readyHttp", path}, {"readyPort", port}};
      if (status_min != 200 || status_max != 399)
        j["readyHttpStatus"] = status_min == status_max ? nlohmann::json(status_min)
                                                        : nlohmann::json{{"min", status_min}, {"max", status_max}};
      break;
    case Kind::notify: j = {{"readyFd", fd}}; break;
  }
  if (interval_ms > 0) j["readyIntervalMs"] = interval_ms;
  return j;
}

std::string ReadyCondition::describe() const {
  switch (kind) {
    case Kind::port: return "port " + std::to_string(port);
    case Kind::log:
      return "log " + regex + (stream == Stream::out ? " (stdout)" : stream == Stream::err ? " (stderr)" : "");
    case Kind::http: {
      std::string d = "http " + std::to_string(port) + " " + path;
      if (status_min != 200 || status_max != 399)
        d += " " + std::to_string(status_min) + (status_min == status_max ? "" : "-" + std::to_string(status_max));
      return d;
    }
    case Kind::notify: return "fd " + std::to_string(fd);
  }
  return {};
}

bool is_ready_key(std::string_view k) {
  return k == "readyPort" || k == "readyLog" || k == "readyHttp" || k == "readyLogStream" ||
         k == "readyHttpStatus" || k == "readyIntervalMs" || k == "readyFd";
}

Result<std::pair<int, int>> parse_status_range(std::string_view s) {
  auto num = [](std::string_view t, int* out) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), *out);
    return ec == std::errc() && p == t.data() + t.size() && *out >= 100 && *out <= 599;
  };
  int lo = 0, hi = 0;
  const auto dash = s.find('-');
  const bool ok = dash == std::string_view::npos ? (num(s, &lo) && (hi = lo, true))
                                                 : num(s.substr(0, dash), &lo) && num(s.substr(dash + 1), &hi);
  if (!ok || lo > hi)
    return invalid("bad http status '" + std::string(s.substr(0, 20)) + "': want N or A-B, within 100-599");
  return std::pair{lo, hi};
}

namespace {

Result<int> int_key(const nlohmann::json& j, const char* key, long long lo, long long hi) {
  const auto& v = j[key];
  if (!v.is_number_integer()) return invalid(std::string("'") + key + "' must be an integer");
  const auto n = v.get<long long>();
  if (n < lo || n > hi)
    return invalid(std::string("'") + key + "' must be " + std::to_string(lo) + "-" + std::to_string(hi));
  return static_cast<int>(n);
}

Result<std::pair<int, int>> status_key(const nlohmann::json& v) {
  auto in_range = [](const nlohmann::json& n) {
    return n.is_number_integer() && n.get<long long>() >= 100 && n.get<long long>() <= 599;
  };
  if (in_range(v)) return std::pair{v.get<int>(), v.get<int>()};
  if (v.is_object() && v.size() == 2 && v.contains("min") && v.contains("max") && in_range(v["min"]) &&
      in_range(v["max"]) && v["min"].get<int>() <= v["max"].get<int>())
    return std::pair{v["min"].get<int>(), v["max"].get<int>()};
  if (v.is_string()) return parse_status_range(v.get<std::string>());
  return invalid("'readyHttpStatus' must be a status (100-599) or {\"min\": A, \"max\": B} with A <= B");
}

}  // namespace

Result<std::optional<ReadyCondition>> ready_condition_from_json(const nlohmann::json& j, ReadyKeys keys) {
  const bool has_port = j.contains("readyPort"), has_log = j.contains("readyLog"), has_http = j.contains("readyHttp");
  const bool has_fd = j.contains("readyFd");
  if (!has_port && !has_log && !has_http && !has_fd) {
    const char* conditions = keys == ReadyKeys::file_name ? "readyLog or readyPort" : "readyLog, readyPort or readyHttp";
    for (const char* k : {"readyLogStream", "readyHttpStatus", "readyIntervalMs"})
      if (j.contains(k)) return invalid(std::string("'") + k + "' needs a condition (" + conditions + ")");
    return std::optional<ReadyCondition>{};
  }
  ReadyCondition c;
  if (has_fd) {
    if (keys != ReadyKeys::request)
      return invalid("'readyFd' belongs in the start request: the command gets the descriptor when it starts");
    if (has_port || has_log || has_http) return invalid("give readyFd alone");
    auto fd = int_key(j, "readyFd", 3, kMaxReadyFd);
    if (!fd) return fd.error();
    c.kind = ReadyCondition::Kind::notify;
    c.fd = fd.value();
  }
  if (has_log && (has_port || has_http)) return invalid("give readyLog alone, or readyPort (with readyHttp)");
  if (has_port) {
    auto p = int_key(j, "readyPort", 1, 65535);
    if (!p) return p.error();
    c.port = p.value();
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
  if (j.contains("readyLogStream")) {
    if (!has_log) return invalid("'readyLogStream' needs 'readyLog'");
    const auto& v = j["readyLogStream"];
    const std::string s = v.is_string() ? v.get<std::string>() : "";
    if (s == "stdout") c.stream = ReadyCondition::Stream::out;
    else if (s == "stderr") c.stream = ReadyCondition::Stream::err;
    else if (s != "both") return invalid("'readyLogStream' must be \"stdout\", \"stderr\" or \"both\"");
  }
  if (j.contains("readyHttpStatus")) {
    if (!has_http) return invalid("'readyHttpStatus' needs 'readyHttp'");
    auto r = status_key(j["readyHttpStatus"]);
    if (!r) return r.error();
    c.status_min = r.value().first;
    c.status_max = r.value().second;
  }
  if (j.contains("readyIntervalMs")) {
    if (!has_port) return invalid("'readyIntervalMs' needs 'readyPort' (a port or http condition)");
    auto ms = int_key(j, "readyIntervalMs", kMinIntervalMs, 3600 * 1000);
    if (!ms) return ms.error();
    c.interval_ms = ms.value();
  }
  return std::optional<ReadyCondition>(c);
}

Result<ReadyCondition> parse_ready_condition(std::string_view text) {
  // Each write is a condition: a longer line, which stdio and the kernel
  // pass on in pieces of 4096 bytes or more, is refused at its first piece.
  if (text.size() > kMaxConditionBytes)
    return Error{Errc::too_big, "a condition is at most " + std::to_string(kMaxConditionBytes) + " bytes"};
  text = trim(text);
  if (text.empty()) return invalid("empty condition: write 'port N', 'log REGEX' or 'http N /PATH [STATUS]'");
  if (auto why = why_not_text(text)) return invalid("the condition is not text: " + *why);
  // A line matches a log condition, so a pattern of several lines never
  // would; one condition a write (JSON may span lines).
  if (text.front() != '{' && text.find('\n') != std::string_view::npos)
    return invalid("one condition per write, on one line: this one has several");
  if (text.front() == '{') {
    std::string twice;
    const nlohmann::json j = parse_json_keys_once(text, &twice);
    if (j.is_discarded() || !j.is_object()) return invalid("malformed JSON condition");
    if (!twice.empty()) return invalid("the key \"" + twice + "\" is given twice in one object: give it once");
    for (auto& [k, v] : j.items())
      if (!is_ready_key(k) || k == "readyFd")
        return invalid("unknown key '" + k +
                       "' (known: readyPort readyLog readyLogStream readyHttp readyHttpStatus readyIntervalMs)");
    auto c = ready_condition_from_json(j, ReadyKeys::ready_file);
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
    std::string_view tail = sp2 == std::string_view::npos ? std::string_view("/") : trim(rest.substr(sp2));
    // `http 3000 /health 200-299`: a status range after the path.
    if (auto sp3 = tail.find_first_of(" \t"); sp3 != std::string_view::npos) {
      auto r = parse_status_range(trim(tail.substr(sp3)));
      if (!r) return r.error();
      c.status_min = r.value().first;
      c.status_max = r.value().second;
      tail = tail.substr(0, sp3);
    }
    c.path = std::string(tail);
    if (auto st = check_path(c.path); !st) return st.error();
  } else {
    return invalid("unknown condition '" + std::string(word.substr(0, 20)) + "': write 'port N', 'log REGEX' or 'http N /PATH [STATUS]'");
  }
  return c;
}

}  // namespace sup
