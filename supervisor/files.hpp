#pragma once
// Small file helpers for the state directory, as Results. Writes are
// atomic (supervisor/atomic_write.hpp says how).
#include <chrono>
#include <optional>
#include <string>

#include "supervisor/error.hpp"

namespace sup {

/// Writes `content` to `path` atomically (path.tmp + rename; with `sync`, fsync both).
Status write_file_atomic(const std::string& path, const std::string& content, bool sync = false);
/// The whole file, or nullopt when it does not exist; other failures are errors.
Result<std::optional<std::string>> read_file(const std::string& path);
/// rm -rf; missing is fine.
void remove_tree(const std::string& path);
/// mkdir -p with `mode` for the last component.
Status make_dirs(const std::string& path, unsigned mode);
/// Asks the file system to place each subdirectory of `dir` as the top of a
/// hierarchy of its own (chattr +T; ext2/3/4's Orlov allocator), away from
/// the parent's block group. False where the flag is not supported.
bool spread_subdirectories(const std::string& dir);
/// flock(LOCK_EX) of `fd`, tried every 10 ms for up to `wait` (flock has no
/// timeout; for a start-up, never a request): 0, EWOULDBLOCK when another
/// still holds it then, or flock's errno.
int lock_within(int fd, std::chrono::milliseconds wait);

}  // namespace sup
