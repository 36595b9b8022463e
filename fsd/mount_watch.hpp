#pragma once
// Notices that our mount has left the mount table while the daemon still
// serves it. A lazy unmount (`fusermount3 -uz`, umount2 with MNT_DETACH)
// detaches the mount at once, but the FUSE connection lives on, and the
// daemon is told nothing, until the last process holding a file or working
// directory in it lets go: a reader parked on `wait` kept the old daemon,
// and the state directory's lock, for as long as its command ran.
//
// Event-driven: /proc/self/mountinfo reports POLLPRI|POLLERR to poll(2)
// whenever the mount table changes; only then is the table read again.
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "fsd/stale_mount.hpp"
#include "supervisor/error.hpp"
#include "supervisor/unique_fd.hpp"

namespace fsd {

class MountWatch {
 public:
  /// Watches the top sbxfs mount at `mountpoint` (absolute, normalised, just
  /// mounted; symlinks in its parent are resolved here, as the kernel did).
  /// `on_gone` runs once, on the watch's own thread, when that mount is no
  /// longer in the table. not_found when no sbxfs is mounted there.
  static sup::Result<std::unique_ptr<MountWatch>> start(const std::string& mountpoint,
                                                        std::function<void()> on_gone);
  ~MountWatch();  ///< stops the thread (after on_gone, if it is running)
  MountWatch(const MountWatch&) = delete;
  MountWatch& operator=(const MountWatch&) = delete;

  /// Whether the mount is in the table now.
  bool mounted() const;

 private:
  struct Token {};  // only start() constructs

 public:
  MountWatch(Token, std::string mountpoint, MountEntry mount, sup::UniqueFd table, sup::UniqueFd stop,
             std::function<void()> on_gone);

 private:
  void run();

  const std::string mountpoint_;
  const MountEntry mount_;  // id and dev: a later mount at the same place is another one
  const sup::UniqueFd table_;  // /proc/self/mountinfo, polled
  const sup::UniqueFd stop_;   // eventfd: the destructor's word
  const std::function<void()> on_gone_;
  std::thread thread_;
};

}  // namespace fsd
