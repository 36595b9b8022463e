#pragma once
// The daemon's own mount, which no thread of the daemon may look into: a
// lookup there is a request to the daemon itself, and one in flight when
// the daemon is killed (SIGKILL) waits for an answer for ever: the daemon
// stays a zombie that holds /dev/fuse, and every access to the mount, and
// the next daemon's start, hang. A user's path (a request's cwd, its PATH,
// a working directory measured) is therefore resolved a name at a time,
// its symbolic links followed by readlink in the folders above, and never
// looked at once it reaches the mount point.
#include <chrono>
#include <memory>
#include <mutex>
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
  /// Absolute `path` resolved (resolve_outside) away from the mount and
  /// its other mounts (points_now(), read again at most every 2 s): what to
  /// look at in its place (so that a link changed since is not followed
  /// again), or nullopt when it leads into one of them. As it is without a
  /// mount point.
  std::optional<std::string> outside(const std::string& path) const;
  /// Whether absolute `path` leads into the mount (or another mount of it).
  bool holds(const std::string& path) const { return !outside(path); }
  /// The mount point and the other mounts of the same file system (bind
  /// mounts of it), from /proc/self/mountinfo: none of them looked at.
  std::vector<std::string> points_now() const;

  /// Absolute `path` with its links, "." and ".." resolved as the kernel
  /// would, never looking at anything at or below a path of `avoid`:
  /// nullopt when it leads there, or through a link of /proc/PID/ (cwd,
  /// root, fd/N: the kernel follows those to a place that their text does
  /// not name, maybe in another mount namespace). A name that is no link
  /// (or cannot be read) is taken as it is: whoever opens the result
  /// learns why not.
  static std::optional<std::string> resolve_outside(const std::string& path, const std::vector<std::string>& avoid);

 private:
  struct Points {
    std::mutex mu;
    std::vector<std::string> list;                   // guarded by mu
    std::chrono::steady_clock::time_point read_at;  // guarded by mu
  };
  std::string point_;
  std::shared_ptr<Points> points_ = std::make_shared<Points>();  // shared by copies
};

}  // namespace sup
