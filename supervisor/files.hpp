#pragma once
// Small file helpers for the state directory. Writes are atomic: temp file,
// fsync, rename, fsync of the folder, so a crash leaves the old or the new
// content, never a torn one.
#include <optional>
#include <string>

#include "supervisor/error.hpp"

namespace sup {

/// Writes `content` to `path` atomically (path.tmp + fsync + rename + fsync dir).
Status write_file_atomic(const std::string& path, const std::string& content, bool sync = true);
/// The whole file, or nullopt when it does not exist; other failures are errors.
Result<std::optional<std::string>> read_file(const std::string& path);
/// rm -rf; missing is fine.
void remove_tree(const std::string& path);
/// mkdir -p with `mode` for the last component.
Status make_dirs(const std::string& path, unsigned mode);

}  // namespace sup
