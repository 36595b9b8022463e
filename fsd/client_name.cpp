#include "fsd/client_name.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <string_view>

#include "supervisor/unique_fd.hpp"
#include "supervisor/utf8.hpp"

namespace fsd {

namespace {

constexpr std::string_view kVar = "SBX_CLIENT=";
/// An environment larger than this is read no further (ARG_MAX is 2 MiB;
/// the variable is found in the first pages almost always).
constexpr std::size_t kMaxEnviron = std::size_t{2} << 20;

}  // namespace

std::string client_of(pid_t pid) {
  if (pid <= 0) return {};
  const std::string path = "/proc/" + std::to_string(pid) + "/environ";
  const sup::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  std::string env;
  char buf[16384];
  while (env.size() < kMaxEnviron) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n <= 0) break;
    env.append(buf, static_cast<std::size_t>(n));
  }
  // NUL-separated KEY=VALUE strings; the first SBX_CLIENT wins, as getenv's does.
  for (std::size_t at = 0; at < env.size();) {
    std::size_t end = env.find('\0', at);
    if (end == std::string::npos) end = env.size();
    const std::string_view entry(env.data() + at, end - at);
    if (entry.starts_with(kVar)) {
      const std::string_view value = entry.substr(kVar.size());
      if (sup::why_not_text(value)) return {};
      return std::string(sup::utf8_head(value, kMaxClientName));
    }
    at = end + 1;
  }
  return {};
}

}  // namespace fsd
