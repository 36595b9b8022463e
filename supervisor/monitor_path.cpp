#include <unistd.h>

#include <filesystem>

#include "supervisor/supervisor.hpp"

namespace sup {

namespace fs = std::filesystem;

std::string default_monitor_path() {
  std::error_code ec;
  auto self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / "sbxfs-monitor";
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
#ifdef SBX_MONITOR_BUILD_PATH
  return SBX_MONITOR_BUILD_PATH;
#else
  return "sbxfs-monitor";
#endif
}

}  // namespace sup
