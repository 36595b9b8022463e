#include "fsd/mount_watch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>

namespace fsd {

namespace {

/// Where the mount table shows `mountpoint`: with its parent's symlinks
/// resolved (the mount itself must not be touched: its daemon may not serve
/// yet).
std::string as_mounted(const std::string& mountpoint) {
  const std::size_t slash = mountpoint.rfind('/');
  if (slash == std::string::npos || slash + 1 == mountpoint.size()) return mountpoint;
  char parent[PATH_MAX];
  if (::realpath(slash == 0 ? "/" : mountpoint.substr(0, slash).c_str(), parent) == nullptr) return mountpoint;
  const std::string p(parent);
  return (p == "/" ? "" : p) + mountpoint.substr(slash);
}

}  // namespace

sup::Result<std::unique_ptr<MountWatch>> MountWatch::start(const std::string& path,
                                                          std::function<void()> on_gone) {
  const std::string mountpoint = as_mounted(path);
  // Opened before the mount is looked up, so a change in between is seen.
  sup::UniqueFd table(::open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC));
  if (!table) return sup::error_from_errno(errno, "cannot open /proc/self/mountinfo");
  sup::UniqueFd stop(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop) return sup::error_from_errno(errno, "eventfd");
  const std::vector<MountEntry> mounts = mounts_at(mountpoint);
  if (mounts.empty() || mounts.back().fstype != "fuse.sbxfs")
    return sup::Error{sup::Errc::not_found, "no sbxfs is mounted at " + mountpoint};
  auto w = std::make_unique<MountWatch>(Token{}, mountpoint, mounts.back(), std::move(table), std::move(stop),
                                        std::move(on_gone));
  w->thread_ = std::thread([raw = w.get()] {
    ::pthread_setname_np(::pthread_self(), "sbx-mounts");
    raw->run();
  });
  return w;
}

MountWatch::MountWatch(Token, std::string mountpoint, MountEntry mount, sup::UniqueFd table, sup::UniqueFd stop,
                       std::function<void()> on_gone)
    : mountpoint_(std::move(mountpoint)),
      mount_(std::move(mount)),
      table_(std::move(table)),
      stop_(std::move(stop)),
      on_gone_(std::move(on_gone)) {}

MountWatch::~MountWatch() {
  const std::uint64_t one = 1;
  (void)!::write(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

bool MountWatch::mounted() const {
  bool read = false;
  const std::vector<MountEntry> mounts = mounts_at(mountpoint_, &read);
  if (!read) return true;  // out of fds, say: no news is not an unmount (the next change looks again)
  for (const MountEntry& m : mounts)
    if (m.id == mount_.id && m.dev == mount_.dev) return true;
  return false;
}

void MountWatch::run() {
  // The table is read once first: it may have changed before the fd was polled.
  while (mounted()) {
    pollfd fds[2] = {{table_.get(), POLLPRI, 0}, {stop_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;  // cannot watch: the daemon serves on as before
    }
    if (fds[1].revents != 0) return;
  }
  on_gone_();
}

}  // namespace fsd
