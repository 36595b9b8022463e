#include "supervisor/state_dir_place.hpp"

#include <sys/stat.h>

#include <filesystem>

namespace sup {

namespace {

/// The names a state directory uses for itself (FORMAT.md).
constexpr const char* kOwnNames[] = {"procs", "staging", "steps", "scripts", "counter",
                                     "errors", "lock",    "pid",   "sbxfs.log", "sbxfs.log.1"};

bool is_regular(const std::filesystem::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

std::string state_dir_misplaced(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir).lexically_normal();
  const std::filesystem::path self = path.has_filename() ? path : path.parent_path();
  const std::string name = self.filename().string();
  for (const char* own : kOwnNames) {
    if (name == own && is_regular(self.parent_path() / "lock"))
      return "state directory " + dir + " is the " + own + " of the state directory " + self.parent_path().string();
    if (is_regular(self / own / "lock")) return "state directory " + dir + " holds another state directory in its " + own;
  }
  return {};
}

}  // namespace sup
