#include "supervisor/state_dir_place.hpp"

#include <sys/stat.h>

#include <filesystem>

namespace sup {

namespace fs = std::filesystem;

namespace {

/// The names a state directory uses for itself (FORMAT.md).
constexpr const char* kOwnNames[] = {"procs", "staging", "steps",     "scripts",     "counter", "errors",
                                     "lock",  "pid",     "sbxfs.log", "sbxfs.log.1", "mounting"};

bool own_name(const std::string& name) {
  for (const char* own : kOwnNames)
    if (name == own) return true;
  return false;
}

/// A state directory: its lock a file, its records' folder a folder (a
/// record named `lock` is a folder; a stray file named lock is no sign).
bool is_state_dir(const fs::path& dir) {
  struct stat lock {}, procs {};
  return ::stat((dir / "lock").c_str(), &lock) == 0 && S_ISREG(lock.st_mode) &&
         ::stat((dir / "procs").c_str(), &procs) == 0 && S_ISDIR(procs.st_mode);
}

}  // namespace

std::string state_dir_misplaced(const std::string& dir) {
  // Where it really is: through symlinks, to the folders that exist.
  std::error_code ec;
  fs::path self = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (ec) self = fs::path(dir).lexically_normal();
  if (!self.has_filename()) self = self.parent_path();
  // Inside another, at any depth below one of its own entries.
  for (fs::path child = self, above = self.parent_path(); above != child; child = above, above = above.parent_path())
    if (own_name(child.filename().string()) && is_state_dir(above))
      return "state directory " + dir + " is inside the " + child.filename().string() + " of the state directory " +
             above.string();
  // Another inside it, made there first: in one of its own entries, or one level below.
  for (const char* own : kOwnNames) {
    const fs::path entry = self / own;
    if (is_state_dir(entry)) return "state directory " + dir + " holds another state directory in its " + own;
    for (const fs::directory_entry& e : fs::directory_iterator(entry, ec))
      if (e.is_directory(ec) && is_state_dir(e.path()))
        return "state directory " + dir + " holds another state directory in its " + own;
  }
  return {};
}

}  // namespace sup
