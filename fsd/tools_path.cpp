#include "fsd/tools_path.hpp"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace fsd {

void put_tools_on_path() {
  const char* old = std::getenv("PATH");
  const std::string path = old && *old ? old : "/usr/local/bin:/usr/bin:/bin";
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && ::access((self.parent_path() / "sbx-step").c_str(), X_OK) == 0) {
    const std::string dir = self.parent_path().string();
    if (path != dir && path.rfind(dir + ":", 0) != 0) ::setenv("PATH", (dir + ":" + path).c_str(), 1);
    return;
  }
#ifdef SBX_TOOLS_BUILD_DIR
  // A daemon copied elsewhere alone: the build's folder, as it finds its
  // monitor; last, so that nothing there shadows the commands' own programs.
  if (::access(SBX_TOOLS_BUILD_DIR "/sbx-step", X_OK) == 0) {
    const std::string dir = SBX_TOOLS_BUILD_DIR;
    if (path != dir && !path.ends_with(":" + dir)) ::setenv("PATH", (path + ":" + dir).c_str(), 1);
  }
#endif
}

}  // namespace fsd
