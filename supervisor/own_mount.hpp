#pragma once
// The daemon's own mount, which no thread of the daemon may look into: a
// lookup there is a request to the daemon itself, and one in flight when
// the daemon is killed (SIGKILL) waits for an answer for ever: the daemon
// stays a zombie that holds /dev/fuse, and every access to the mount, and
// the next daemon's start, hang. A user's path (a request's cwd, its PATH,
// a working directory measured) is therefore resolved a name at a time,
// its symbolic links followed by readlink in the folders above, and never
// looked at once it reaches the mount point.
#include <optional>
#include <string>
#include <vector>

namespace sup {

class OwnMount {
 public:
  OwnMount() = default;
  /// `mount_point` absolute; the links of the folder it is in are resolved
  /// (the point itself is not looked at). Empty: no mount to keep out of.
  explicit OwnMount(const std::string& mount_point);

  const std::string& point() const { return point_; }
  /// Whether absolute `path` leads into the mount point (or is it).
  bool holds(const std::string& path) const;
  /// The mount point and the other mounts of the same file system (bind
  /// mounts of it), from /proc/self/mountinfo: none of them looked at.
  std::vector<std::string> points_now() const;

  /// Absolute `path` with its links, "." and ".." resolved as the kernel
  /// would, never looking at anything at or below a path of `avoid`:
  /// nullopt when it leads there. A name that is no link (or cannot be
  /// read) is taken as it is: whoever opens the result learns why not.
  static std::optional<std::string> resolve_outside(const std::string& path, const std::vector<std::string>& avoid);

 private:
  std::string point_;
};

}  // namespace sup
