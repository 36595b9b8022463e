#include "supervisor/monitor_job.hpp"

#include <charconv>
#include <cstdint>

namespace sup {

std::string encode_job(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                       const std::string& cwd) {
  std::string job;
  auto put = [&job](const std::string& s) {
    job += s;
    job += '\0';
  };
  put(std::to_string(args.size()));
  for (auto& a : args) put(a);
  put(std::to_string(env.size()));
  for (const auto& [k, v] : env) put(k + "=" + v);
  put(cwd);
  return job;
}

bool parse_job(std::string& job, JobParts* out) {
  std::vector<char*> parts;
  std::size_t pos = 0;
  while (pos < job.size()) {
    std::size_t end = job.find('\0', pos);
    if (end == std::string::npos) return false;
    parts.push_back(job.data() + pos);
    pos = end + 1;
  }
  std::size_t i = 0;
  auto count = [&](std::size_t* n) {
    if (i >= parts.size()) return false;
    const std::string_view s(parts[i++]);
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v > parts.size()) return false;
    *n = static_cast<std::size_t>(v);
    return true;
  };
  std::size_t argc = 0, envc = 0;
  if (!count(&argc) || i + argc > parts.size()) return false;
  out->args.assign(parts.begin() + static_cast<long>(i), parts.begin() + static_cast<long>(i + argc));
  i += argc;
  if (!count(&envc) || i + envc + 1 != parts.size()) return false;
  out->env.assign(parts.begin() + static_cast<long>(i), parts.begin() + static_cast<long>(i + envc));
  out->cwd = parts[i + envc];
  return true;
}

}  // namespace sup
