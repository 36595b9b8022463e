#include "supervisor/spec.hpp"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "supervisor/strict_json.hpp"
#include "supervisor/utf8.hpp"

namespace sup {

namespace {

using nlohmann::json;

Error invalid(std::string msg) { return Error{Errc::invalid_argument, std::move(msg)}; }

std::string type_name(const json& v) { return v.type_name(); }
/// Why `v` is no whole number: JSON's 2.0 and 1e3 are numbers, not whole ones.
std::string not_whole(const json& v) {
  if (v.is_number_float()) return v.dump() + " (a whole number is digits alone, without a point or an exponent)";
  return type_name(v);
}

Result<std::map<std::string, std::string>> string_map(const json& v, const char* key) {
  if (!v.is_object()) return invalid(std::string("'") + key + "' must be an object of strings, not " + type_name(v));
  std::map<std::string, std::string> out;
  for (auto& [k, val] : v.items()) {
    if (!val.is_string())
      return invalid(std::string("'") + key + "." + k + "' must be a string, not " + type_name(val));
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos)
      return invalid(std::string("'") + key + "' has a bad variable name: '" + k + "'");
    const auto& s = val.get_ref<const std::string&>();
    if (s.find('\0') != std::string::npos)
      return invalid(std::string("'") + key + "." + k + "' contains a NUL byte");
    out[k] = s;
  }
  return out;
}

Result<double> number(const json& v, const char* key) {
  if (!v.is_number()) return invalid(std::string("'") + key + "' must be a number, not " + type_name(v));
  double d = v.get<double>();
  if (!std::isfinite(d)) return invalid(std::string("'") + key + "' must be finite");
  return d;
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

std::string hex_byte(unsigned char c) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", c);
  return b;
}

// The supervision options' keys (restart, restartDelaySec, maxRestarts,
// queue). False in *known for any other key.
Status parse_supervision_key(const std::string& key, const json& v, StartSpec& s, bool* known) {
  *known = true;
  if (key == "restart") {
    if (!v.is_string()) return invalid("'restart' must be a string, not " + type_name(v));
    auto p = parse_restart_policy(v.get_ref<const std::string&>());
    if (!p) return invalid("'restart' must be \"no\", \"on-failure\" or \"always\"");
    s.restart = *p;
  } else if (key == "restartDelaySec") {
    auto d = number(v, "restartDelaySec");
    if (!d) return d.error();
    if (d.value() <= 0) return invalid("'restartDelaySec' must be > 0");
    if (d.value() > 86400) return invalid("'restartDelaySec' is too large (at most 86400)");
    s.restart_delay_sec = d.value();
  } else if (key == "maxRestarts") {
    if (!v.is_number_integer() && !v.is_number_unsigned())
      return invalid("'maxRestarts' must be a whole number, not " + not_whole(v));
    if (v.is_number_integer() && v.get<std::int64_t>() < 0) return invalid("'maxRestarts' must be >= 0");
    s.max_restarts = v.get<std::uint64_t>();
  } else if (key == "queue") {
    if (!v.is_boolean()) return invalid("'queue' must be true or false, not " + type_name(v));
    s.queue = v.get<bool>();
  } else {
    *known = false;
  }
  return Ok{};
}

}  // namespace

std::vector<std::string> StartSpec::effective_argv() const {
  if (shell && !script_file.empty()) return {"/bin/sh", script_file};
  if (shell) return {"/bin/sh", "-c", *shell};
  return argv;
}

Status validate_name(const std::string& name) {
  if (Status st = validate_stored_name(name); !st) return st;
  if (name[0] == '.') return invalid("name may not begin with '.' (such names are for scratch files)");
  return Ok{};
}

Status validate_stored_name(const std::string& name) {
  if (name.empty()) return invalid("name is empty");
  if (name.size() > 64) return Error{Errc::name_too_long, "name is longer than 64 characters"};
  if (name == "." || name == "..") return invalid("name may not be '.' or '..'");
  for (unsigned char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return invalid("name may hold only A-Z a-z 0-9 . _ - (got a byte " + hex_byte(c) + ")");
  }
  return Ok{};
}

Result<Limits> limits_from_json(const json& v) {
  if (!v.is_object()) return invalid("'limits' must be an object, not " + type_name(v));
  Limits l;
  auto whole = [&](const json& x, const std::string& name, std::uint64_t least) -> Result<std::uint64_t> {
    if (!x.is_number_integer() && !x.is_number_unsigned())
      return invalid("'limits." + name + "' must be a whole number, not " + not_whole(x));
    if (x.is_number_integer() && x.get<std::int64_t>() < static_cast<std::int64_t>(least))
      return invalid("'limits." + name + "' must be at least " + std::to_string(least));
    std::uint64_t n = x.get<std::uint64_t>();
    if (n < least) return invalid("'limits." + name + "' must be at least " + std::to_string(least));
    return n;
  };
  for (auto& [key, x] : v.items()) {
    if (key == "memoryMax") {
      auto n = whole(x, key, 4096);
      if (!n) return n.error();
      l.memory_max = n.value();
    } else if (key == "pidsMax") {
      auto n = whole(x, key, 1);
      if (!n) return n.error();
      l.pids_max = n.value();
    } else if (key == "cpuMax") {
      auto d = number(x, "limits.cpuMax");
      if (!d) return d.error();
      if (d.value() <= 0 || d.value() > 1e6) return invalid("'limits.cpuMax' must be a percent > 0 (100 = one core)");
      l.cpu_max = d.value();
    } else {
      return invalid("unknown key 'limits." + key + "' (known: memoryMax cpuMax pidsMax)");
    }
  }
  return l;
}

json limits_to_json(const Limits& l) {
  json j = json::object();
  if (l.memory_max) j["memoryMax"] = *l.memory_max;
  if (l.cpu_max) j["cpuMax"] = *l.cpu_max;
  if (l.pids_max) j["pidsMax"] = *l.pids_max;
  return j;
}

Result<StartSpec> parse_json_request(const json& j, const std::string& default_cwd) {
  if (!j.is_object()) return invalid("a JSON request must be an object, not " + type_name(j));
  StartSpec s;
  s.cwd = default_cwd;
  bool have_argv = false, have_cmd = false;
  for (auto& [key, v] : j.items()) {
    if (key == "argv") {
      if (!v.is_array()) return invalid("'argv' must be an array of strings, not " + type_name(v));
      for (auto& a : v) {
        if (!a.is_string()) return invalid("'argv' must hold only strings, found " + type_name(a));
        if (has_nul(a.get_ref<const std::string&>())) return invalid("'argv' contains a NUL byte");
        s.argv.push_back(a.get<std::string>());
      }
      if (s.argv.empty() || s.argv[0].empty()) return invalid("'argv' is empty");
      have_argv = true;
    } else if (key == "cmd") {
      if (!v.is_string()) return invalid("'cmd' must be a string, not " + type_name(v));
      s.shell = v.get<std::string>();
      if (has_nul(*s.shell)) return invalid("'cmd' contains a NUL byte");
      if (s.shell->find_first_not_of(" \t\r\n") == std::string::npos) return invalid("'cmd' is empty");
      have_cmd = true;
    } else if (key == "cwd") {
      if (!v.is_string()) return invalid("'cwd' must be a string, not " + type_name(v));
      s.cwd = v.get<std::string>();
      if (s.cwd.empty()) return invalid("'cwd' is empty");
      s.cwd_is_writers = s.cwd == default_cwd;
      if (has_nul(s.cwd)) return invalid("'cwd' contains a NUL byte");
    } else if (key == "env") {
      auto m = string_map(v, "env");
      if (!m) return m.error();
      s.env = std::move(m.value());
    } else if (key == "secretEnv") {
      auto m = string_map(v, "secretEnv");
      if (!m) return m.error();
      s.secret_env = std::move(m.value());
    } else if (key == "note") {
      if (!v.is_string()) return invalid("'note' must be a string, not " + type_name(v));
      s.note = v.get<std::string>();
    } else if (key == "name") {
      if (!v.is_string()) return invalid("'name' must be a string, not " + type_name(v));
      s.name = v.get<std::string>();
      if (auto st = validate_name(s.name); !st) return st.error();
    } else if (key == "timeoutSec") {
      auto d = number(v, "timeoutSec");
      if (!d) return d.error();
      if (d.value() <= 0) return invalid("'timeoutSec' must be > 0");
      if (d.value() > 1e9) return invalid("'timeoutSec' is too large");
      s.timeout_sec = d.value();
    } else if (key == "stopGraceSec") {
      auto d = number(v, "stopGraceSec");
      if (!d) return d.error();
      if (d.value() < 0) return invalid("'stopGraceSec' must be >= 0");
      if (d.value() > 1e6) return invalid("'stopGraceSec' is too large");
      s.stop_grace_sec = d.value();
    } else if (key == "limits") {
      auto l = limits_from_json(v);
      if (!l) return l.error();
      s.limits = l.value();
    } else if (key == "stdin") {
      // "null" (or JSON null): /dev/null, as without the key; "pipe": procs/ID/stdin.
      if (!v.is_null() && !(v.is_string() && (v == "null" || v == "pipe")))
        return invalid("'stdin' must be \"null\" or \"pipe\", not " +
                       (v.is_string() ? "\"" + std::string(utf8_head(v.get_ref<const std::string&>(), 40)) + "\""
                                     : type_name(v)));
      s.stdin_pipe = v == "pipe";
    } else if (is_ready_key(key)) {
      // Readiness (readyPort readyLog readyLogStream readyHttp readyHttpStatus
      // readyIntervalMs readyFd): checked together below.
    } else {
      bool known = false;
      if (Status st = parse_supervision_key(key, v, s, &known); !st) return st.error();
      if (!known)
        return invalid("unknown key '" + key +
                       "' (known: argv cmd cwd env secretEnv note name timeoutSec stopGraceSec readyPort readyLog "
                       "readyLogStream readyHttp readyHttpStatus readyIntervalMs readyFd limits stdin restart "
                       "restartDelaySec maxRestarts queue)");
    }
  }
  auto ready = ready_condition_from_json(j);
  if (!ready) return ready.error();
  s.ready = ready.value();
  if (have_argv == have_cmd) return invalid("give exactly one of 'argv' and 'cmd'");
  return s;
}

Result<StartSpec> parse_text_request(std::string_view text, const std::string& default_cwd) {
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  // Binary data is no command (and a JSON request is UTF-8 text too).
  if (auto why = why_not_text(text)) return invalid("the command is not text: " + *why);
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return invalid("the command is empty");
  StartSpec s;
  s.shell = std::string(text);
  s.cwd = default_cwd;
  return s;
}

Result<StartSpec> parse_request(std::string_view text, const std::string& default_cwd) {
  auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    // JSON has no raw NUL byte (in a string it is \u0000), and the parser
    // takes one for the end of its input: what follows would go unread.
    if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
      return invalid("malformed JSON: a NUL byte at byte " + std::to_string(nul + 1) +
                     " (JSON has none outside strings; in a string, write \\u0000)");
    // A key given twice in one object would silently mean its last value.
    std::string twice;
    json j = parse_json_keys_once(text, &twice);
    if (!j.is_discarded() && !twice.empty())
      return invalid("the key \"" + twice + "\" is given twice in one object: give it once");
    if (j.is_discarded()) {
      // Ask again with exceptions for a message that says where it broke.
      try {
        json again = json::parse(text.begin(), text.end());
        (void)again;
      } catch (const json::exception& e) {
        // Where and why, without the library's own tag ("[json.exception.parse_error.101] ").
        std::string_view why = e.what();
        if (why.starts_with("[json.exception.") && why.find("] ") != std::string_view::npos)
          why.remove_prefix(why.find("] ") + 2);
        return invalid("malformed JSON: " + std::string(why));
      }
      return invalid("malformed JSON");
    }
    return parse_json_request(j, default_cwd);
  }
  return parse_text_request(text, default_cwd);
}

json spec_to_json(const StartSpec& s) {
  json j;
  j["argv"] = s.effective_argv();
  if (s.shell) j["shell"] = *s.shell;
  j["cwd"] = s.cwd;
  j["env"] = s.env;
  j["secretEnv"] = s.secret_env;
  j["note"] = s.note;
  j["name"] = s.name;
  if (s.timeout_sec) j["timeoutSec"] = *s.timeout_sec;
  j["stopGraceSec"] = s.stop_grace_sec;
  j["requesterSid"] = s.requester_sid;
  j["requesterUid"] = s.requester_uid;
  if (!s.requester_client.empty()) j["requesterClient"] = s.requester_client;
  if (s.ready) j["ready"] = s.ready->to_json();
  if (!s.script_file.empty()) j["scriptFile"] = s.script_file;
  if (s.limits) j["limits"] = limits_to_json(*s.limits);
  if (s.stdin_pipe) j["stdin"] = "pipe";
  if (s.restart != RestartPolicy::no) {
    j["restart"] = restart_policy_name(s.restart);
    j["restartDelaySec"] = s.restart_delay_sec;
    if (s.max_restarts) j["maxRestarts"] = *s.max_restarts;
  }
  if (s.queue) j["queue"] = true;
  if (s.run_as) j["runAs"] = {{"uid", s.run_as->uid}, {"gid", s.run_as->gid}, {"groups", s.run_as->groups}};
  return j;
}

Result<StartSpec> spec_from_json(const json& j) {
  try {
    StartSpec s;
    if (j.contains("shell")) s.shell = j.at("shell").get<std::string>();
    else s.argv = j.at("argv").get<std::vector<std::string>>();
    s.cwd = j.at("cwd").get<std::string>();
    s.env = j.value("env", std::map<std::string, std::string>{});
    s.secret_env = j.value("secretEnv", std::map<std::string, std::string>{});
    s.note = j.value("note", "");
    s.name = j.value("name", "");
    if (j.contains("timeoutSec")) s.timeout_sec = j.at("timeoutSec").get<double>();
    s.stop_grace_sec = j.value("stopGraceSec", 5.0);
    s.requester_sid = j.value("requesterSid", 0);
    s.requester_uid = j.value("requesterUid", 0u);
    s.requester_client = j.value("requesterClient", "");
    s.script_file = j.value("scriptFile", "");
    if (j.contains("ready")) {
      auto r = ready_condition_from_json(j["ready"]);
      if (r && r.value()) s.ready = *r.value();
    }
    if (j.contains("limits")) {
      auto l = limits_from_json(j["limits"]);
      if (!l) return l.error();
      s.limits = l.value();
    }
    s.stdin_pipe = j.value("stdin", "") == "pipe";
    if (auto p = parse_restart_policy(j.value("restart", "no"))) s.restart = *p;
    s.restart_delay_sec = j.value("restartDelaySec", 1.0);
    if (j.contains("maxRestarts")) s.max_restarts = j.at("maxRestarts").get<std::uint64_t>();
    s.queue = j.value("queue", false);
    if (j.contains("runAs")) {
      Credentials c;
      c.uid = j["runAs"].at("uid").get<uid_t>();
      c.gid = j["runAs"].at("gid").get<gid_t>();
      c.groups = j["runAs"].value("groups", std::vector<gid_t>{});
      s.run_as = c;
    }
    return s;
  } catch (const json::exception& e) {
    return Error{Errc::io_error, std::string("spec.json: ") + e.what()};
  }
}

}  // namespace sup
