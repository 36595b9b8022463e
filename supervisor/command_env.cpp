#include "supervisor/command_env.hpp"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <vector>

extern char** environ;

namespace sup {

namespace {

/// What of the supervisor's environment a command of another user keeps:
/// how to find programs and how to show text and time.
bool shared_with_other_users(std::string_view name) {
  return name == "PATH" || name == "TZ" || name == "LANG" || name == "LANGUAGE" || name.starts_with("LC_");
}

/// HOME, USER, LOGNAME and SHELL of `uid`, as a login would set them.
void add_user_env(uid_t uid, std::map<std::string, std::string>& env) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  int err = 0;
  while ((err = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found)) == ERANGE && buf.size() < (1u << 24))
    buf.resize(buf.size() * 4);  // an entry longer than the buffer
  if (err != 0 || found == nullptr) {
    // No entry: a home that needs none, and the number as the name.
    env["HOME"] = "/";
    env["USER"] = env["LOGNAME"] = std::to_string(uid);
    env["SHELL"] = "/bin/sh";
    return;
  }
  env["HOME"] = pw.pw_dir;
  env["USER"] = env["LOGNAME"] = pw.pw_name;
  env["SHELL"] = pw.pw_shell != nullptr && *pw.pw_shell != '\0' ? pw.pw_shell : "/bin/sh";
}

}  // namespace

std::map<std::string, std::string> command_env(const StartSpec& spec, char** base) {
  const bool other_user = spec.run_as && spec.run_as->uid != ::geteuid();
  std::map<std::string, std::string> env;
  for (char** e = base != nullptr ? base : environ; e && *e; ++e) {
    const std::string_view kv(*e);
    const std::size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    if (other_user && !shared_with_other_users(kv.substr(0, eq))) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  if (other_user) add_user_env(spec.run_as->uid, env);
  for (auto& [k, v] : spec.env) env[k] = v;
  for (auto& [k, v] : spec.secret_env) env[k] = v;
  return env;
}

}  // namespace sup
