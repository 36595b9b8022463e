#include "fsd/stale_mount.hpp"

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <vector>

#include <boost/process.hpp>

#include <fuse_log.h>

namespace fsd {

namespace {

/// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.find_first_not_of("01234567") == std::string::npos) {
        out += static_cast<char>(std::stoi(oct, nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace

std::vector<MountEntry> mounts_at(const std::string& path, bool* read) {
  std::vector<MountEntry> out;
  std::ifstream in("/proc/self/mountinfo");
  if (read) *read = in.is_open();
  std::string line;
  while (std::getline(in, line)) {
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
    std::istringstream fields(line);
    MountEntry e;
    std::string parent, root, mnt, field;
    fields >> e.id >> parent >> e.dev >> root >> mnt;
    if (unescape(mnt) != path) continue;
    while (fields >> field && field != "-") {
    }
    if (fields >> e.fstype) out.push_back(std::move(e));
  }
  return out;
}

namespace {

sup::Status detach(const std::string& path) {
  if (::geteuid() == 0) {
    if (::umount2(path.c_str(), MNT_DETACH) == 0) return sup::Ok{};
    return sup::error_from_errno(errno, "umount2(" + path + ", MNT_DETACH)");
  }
  namespace bp = boost::process;
  try {
    const boost::filesystem::path exe = bp::search_path("fusermount3");
    if (exe.empty()) return sup::Error{sup::Errc::not_found, "fusermount3 not found in PATH"};
    const int rc = bp::system(exe, "-uz", path, bp::std_in < bp::null, bp::std_out > bp::null,
                              bp::std_err > stderr, bp::limit_handles);
    if (rc == 0) return sup::Ok{};
    return sup::Error{sup::Errc::io_error,
                      "fusermount3 -uz " + path + " failed (exit " + std::to_string(rc) + ")"};
  } catch (const std::exception& e) {
    return sup::Error{sup::Errc::io_error, std::string("fusermount3 -uz: ") + e.what()};
  }
}

}  // namespace

std::string absolute_path(const std::string& path) {
  std::filesystem::path p(path);
  if (p.is_relative()) p = std::filesystem::current_path() / p;
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool stale_at(const std::string& mountpoint) {
  // statfs(2), not stat(2): the kernel answers a stat of a dead daemon's
  // mount from its attribute cache for up to a second, and a statfs
  // always asks the daemon.
  struct statfs sfs {};
  return ::statfs(mountpoint.c_str(), &sfs) != 0 && (errno == ENOTCONN || errno == ECONNABORTED);
}

sup::Status refuse_live_mount(const std::string& mountpoint) {
  const std::vector<MountEntry> mounts = mounts_at(mountpoint);
  if (!mounts.empty() && mounts.back().fstype == "fuse.sbxfs" && !stale_at(mountpoint))
    return sup::Error{sup::Errc::already_exists, "a live sbxfs is already mounted at " + mountpoint};
  return sup::Ok{};
}

sup::Status clean_stale_mount(const std::string& mountpoint) {
  // Stacked stale mounts are possible (several crashed daemons): peel them off.
  for (int round = 0; round < 8; ++round) {
    const std::vector<MountEntry> mounts = mounts_at(mountpoint);
    if (mounts.empty()) return sup::Ok{};
    const std::string& top = mounts.back().fstype;
    if (!stale_at(mountpoint)) {
      if (top == "fuse.sbxfs")
        return sup::Error{sup::Errc::already_exists, "a live sbxfs is already mounted at " + mountpoint};
      return sup::Ok{};  // something else lives there; mounting on top is the user's choice
    }
    fuse_log(FUSE_LOG_NOTICE, "sbxfs: %s: stale mount (%s), unmounting it\n", mountpoint.c_str(),
             top.c_str());
    if (const sup::Status s = detach(mountpoint); !s) return s;
  }
  return sup::Error{sup::Errc::busy, mountpoint + ": stale mounts keep coming back"};
}

}  // namespace fsd
