#include "fsd/tools_path.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace fsd {

namespace {

/// The folder that holds sbx-step: the daemon's own, else (a daemon copied
/// elsewhere alone, as it finds its monitor) the build's; empty: none.
std::string tools_dir() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && ::access((self.parent_path() / "sbx-step").c_str(), X_OK) == 0) return self.parent_path().string();
#ifdef SBX_TOOLS_BUILD_DIR
  if (::access(SBX_TOOLS_BUILD_DIR "/sbx-step", X_OK) == 0) return SBX_TOOLS_BUILD_DIR;
#endif
  return {};
}

}  // namespace

void put_tools_on_path() {
  const std::string dir = tools_dir();
  if (dir.empty()) return;
  const char* old = std::getenv("PATH");
  const std::string path = old && *old ? old : "/usr/local/bin:/usr/bin:/bin";
  if (path == dir || path.rfind(dir + ":", 0) == 0) return;
  ::setenv("PATH", (dir + ":" + path).c_str(), 1);
}

}  // namespace fsd
