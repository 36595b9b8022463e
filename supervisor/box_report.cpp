#include "supervisor/box_report.hpp"

#include <algorithm>
#include <cctype>
#include <atomic>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "supervisor/clock.hpp"

namespace sup {

namespace {

constexpr double kGb = 1024.0 * 1024.0 * 1024.0;
/// Files looked at per directory before a measurement gives up (partial: true).
constexpr std::uint64_t kMaxFiles = 2'000'000;

double round2(double v) { return std::round(v * 100.0) / 100.0; }

struct Walk {
  dev_t dev;
  const std::atomic<bool>* cancel;  ///< the daemon is exiting: give up
  std::uint64_t files = 0;
  bool partial = false;
};

/// An entry's type, blocks and file system, from the kernel's cached
/// attributes where a file system has its own server (FUSE, NFS): the root
/// of another mount below the walk is never asked, so a server that does
/// not answer does not stop the walk.
bool stat_entry(int dirfd, const char* name, struct stat* st) {
  struct statx x {};
  if (::statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
              STATX_TYPE | STATX_MODE | STATX_BLOCKS, &x) != 0)
    return false;
  st->st_mode = x.stx_mode;
  st->st_blocks = static_cast<blkcnt_t>(x.stx_blocks);
  st->st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
  return true;
}

/// Bytes on disk (st_blocks) under `fd` (a directory, closed here); stays on
/// one filesystem and follows no symlink.
std::uint64_t du_dir(int fd, Walk& w) {
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return 0;
  }
  std::uint64_t total = 0;
  while (dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    if (++w.files > kMaxFiles || w.cancel->load(std::memory_order_relaxed)) {
      w.partial = true;
      break;
    }
    struct stat st {};
    // Another file system mounted here is not counted.
    if (!stat_entry(::dirfd(d), e->d_name, &st) || st.st_dev != w.dev) continue;
    total += static_cast<std::uint64_t>(st.st_blocks) * 512;
    if (S_ISDIR(st.st_mode)) {
      const int sub = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) total += du_dir(sub, w);
    }
  }
  ::closedir(d);
  return total;
}

bool at_or_below(const std::string& path, const std::string& top) {
  return path == top || (path.starts_with(top) && (top == "/" || path[top.size()] == '/'));
}

/// A mount point as /proc/self/mountinfo writes it: space, tab, newline
/// and backslash as \ooo.
std::string unescape_mount_path(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 2])) && std::isdigit(static_cast<unsigned char>(s[i + 3]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

/// `own` and every mount point of the same mount (bind mounts of it), from
/// /proc/self/mountinfo: found without a look into any of them.
std::vector<std::string> own_mount_points(const std::string& own) {
  std::vector<std::string> out = {own};
  if (own.empty()) return {};
  std::ifstream in("/proc/self/mountinfo");
  std::vector<std::pair<std::string, std::string>> mounts;  // (major:minor, mount point)
  std::string device;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    if (!(f >> id >> parent >> dev >> root >> point)) continue;
    point = unescape_mount_path(point);
    if (point == own) device = dev;  // the last one listed is on top
    mounts.emplace_back(dev, point);
  }
  for (const auto& [dev, point] : mounts)
    if (!device.empty() && dev == device && point != own) out.push_back(point);
  return out;
}

/// `dir` with its symbolic links, "." and ".." resolved a name at a time, as
/// the kernel would, but never looking at anything at or below a path of
/// `avoid`: nullopt when `dir` is there.
std::optional<std::string> resolve_outside(const std::string& dir, const std::vector<std::string>& avoid) {
  std::deque<std::string> names;
  auto push_front_path = [&names](const std::string& p) {
    std::vector<std::string> parts;
    for (std::size_t at = 0; at <= p.size();) {
      const std::size_t slash = std::min(p.find('/', at), p.size());
      if (slash > at) parts.push_back(p.substr(at, slash - at));
      at = slash + 1;
    }
    names.insert(names.begin(), parts.begin(), parts.end());
  };
  auto avoided = [&avoid](const std::string& p) {
    return std::any_of(avoid.begin(), avoid.end(), [&p](const std::string& a) { return at_or_below(p, a); });
  };
  push_front_path(dir);
  std::string here = "/";
  if (avoided(here)) return std::nullopt;
  for (int links = 0; !names.empty();) {
    const std::string name = names.front();
    names.pop_front();
    if (name == ".") continue;
    if (name == "..") {
      here = here.substr(0, std::max<std::size_t>(1, here.rfind('/')));
      continue;
    }
    const std::string next = here == "/" ? "/" + name : here + "/" + name;
    if (avoided(next)) return std::nullopt;
    char target[4096];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof target);
    if (n <= 0 || static_cast<std::size_t>(n) >= sizeof target) {
      here = next;  // not a link (or unreadable: the open says why)
      continue;
    }
    if (++links > 40) return dir;  // ELOOP: the open says so
    const std::string to(target, static_cast<std::size_t>(n));
    if (to.starts_with('/')) here = "/";
    push_front_path(to);
  }
  return here;
}

/// {path, measuredAt, totalBytes, entries: [{name, bytes}] (largest first), partial}
nlohmann::json measure(const std::string& dir, const std::atomic<bool>& cancel, const std::string& own_mount) {
  nlohmann::json j = {{"path", dir}};
  const std::optional<std::string> real = resolve_outside(dir, own_mount_points(own_mount));
  if (!real) {
    j["error"] = "in sbxfs's own mount: not measured";
    j["measuredAt"] = sup::iso_now();
    return j;
  }
  struct stat top {};
  const int fd = ::open(real->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 || ::fstat(fd, &top) != 0) {
    if (fd >= 0) ::close(fd);
    j["error"] = std::strerror(errno);
    j["measuredAt"] = sup::iso_now();
    return j;
  }
  Walk w{top.st_dev, &cancel};
  std::vector<std::pair<std::string, std::uint64_t>> entries;
  std::uint64_t total = 0;
  DIR* d = ::fdopendir(fd);
  while (d) {
    dirent* e = ::readdir(d);
    if (!e) break;
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    struct stat st {};
    if (!stat_entry(::dirfd(d), e->d_name, &st) || st.st_dev != w.dev) continue;
    std::uint64_t bytes = static_cast<std::uint64_t>(st.st_blocks) * 512;
    if (S_ISDIR(st.st_mode) && !w.partial) {
      const int sub = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) bytes += du_dir(sub, w);
    }
    total += bytes;
    entries.emplace_back(e->d_name, bytes);
  }
  if (d) ::closedir(d);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  nlohmann::json list = nlohmann::json::array();
  for (std::size_t i = 0; i < entries.size() && i < WorkDirSizes::kTopEntries; ++i)
    list.push_back({{"name", entries[i].first}, {"bytes", entries[i].second}});
  j["measuredAt"] = sup::iso_now();
  j["totalBytes"] = total;
  j["entryCount"] = entries.size();
  j["entries"] = std::move(list);
  j["partial"] = w.partial;
  return j;
}

}  // namespace

nlohmann::json load_json() {
  double avg[3] = {0, 0, 0};
  if (::getloadavg(avg, 3) != 3) return nullptr;
  return {{"1m", round2(avg[0])}, {"5m", round2(avg[1])}, {"15m", round2(avg[2])}};
}

nlohmann::json memory_json() {
  struct sysinfo si {};
  if (::sysinfo(&si) != 0) return nullptr;
  double total = static_cast<double>(si.totalram) * si.mem_unit;
  double available = static_cast<double>(si.freeram + si.bufferram) * si.mem_unit;
  std::ifstream in("/proc/meminfo");
  std::string key;
  unsigned long long kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") available = static_cast<double>(kb) * 1024.0;
  }
  return {{"totalGb", round2(total / kGb)}, {"availableGb", round2(available / kGb)}};
}

nlohmann::json disk_json(const std::string& state_dir) {
  const std::pair<const char*, std::string> places[] = {
      {"stateDir", state_dir}, {"root", "/"}, {"tmp", "/tmp"}, {"shm", "/dev/shm"}};
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::pair<dev_t, std::string>> seen;
  for (const auto& [what, path] : places) {
    nlohmann::json j = {{"what", what}, {"path", path}};
    struct stat st {};
    struct statvfs vfs {};
    if (::stat(path.c_str(), &st) != 0 || ::statvfs(path.c_str(), &vfs) != 0) {
      j["error"] = std::strerror(errno);
      out.push_back(std::move(j));
      continue;
    }
    const auto same = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == st.st_dev; });
    if (same != seen.end()) {
      j["sameAs"] = same->second;
    } else {
      seen.emplace_back(st.st_dev, path);
      const double unit = static_cast<double>(vfs.f_frsize);
      const double size = static_cast<double>(vfs.f_blocks) * unit;
      const double free = static_cast<double>(vfs.f_bavail) * unit;  // what a non-root user can still use
      const double used = static_cast<double>(vfs.f_blocks - vfs.f_bfree) * unit;
      j["sizeGb"] = round2(size / kGb);
      j["usedGb"] = round2(used / kGb);
      j["freeGb"] = round2(free / kGb);
    }
    out.push_back(std::move(j));
  }
  return out;
}

WorkDirSizes::WorkDirSizes() : state_(std::make_shared<State>()), worker_([s = state_] { run(s); }) {}

WorkDirSizes::~WorkDirSizes() {
  std::unique_lock g(state_->mu);
  state_->stop = true;
  state_->cancel = true;
  state_->cv.notify_all();
  // A walk gives up at its next entry; one blocked in a system call on a
  // file system that does not answer would hold the daemon's exit.
  const bool exited = state_->cv.wait_for(g, std::chrono::milliseconds(500), [&] { return state_->exited; });
  g.unlock();
  if (exited)
    worker_.join();
  else
    worker_.detach();
}

void WorkDirSizes::keep_out(const std::string& own_mount) {
  // The folder it is in resolved (links, as mountinfo has none); the mount
  // point itself is not looked at: that would be a request to the daemon.
  std::string point = own_mount;
  const std::filesystem::path p(own_mount);
  if (p.has_parent_path() && p != p.root_path()) {
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::canonical(p.parent_path(), ec);
    if (!ec) point = (parent / p.filename()).string();
  }
  std::lock_guard g(state_->mu);
  state_->own_mount = point;
}

void WorkDirSizes::report(const std::vector<std::string>& dirs, nlohmann::json& measured,
                          nlohmann::json& not_measured) {
  const auto now = std::chrono::steady_clock::now();
  bool queued = false;
  std::lock_guard g(state_->mu);
  for (const std::string& dir : dirs) {
    Result& r = state_->results[dir];
    const bool have = !r.json.is_null();
    if (!r.measuring && (!have || now - r.when >= kFresh)) {
      r.measuring = true;
      state_->queue.push_back(dir);
      queued = true;
    }
    if (have) {
      nlohmann::json j = r.json;
      if (r.measuring) j["refreshing"] = true;
      measured.push_back(std::move(j));
    } else {
      not_measured.push_back({{"what", "workDirSizes"}, {"path", dir}, {"measuring", true}});
    }
  }
  if (queued) state_->cv.notify_all();
}

void WorkDirSizes::run(const std::shared_ptr<State>& s) {
  pthread_setname_np(pthread_self(), "sbx-measure");
  std::unique_lock g(s->mu);
  for (;;) {
    s->cv.wait(g, [&] { return s->stop || !s->queue.empty(); });
    if (s->stop) break;
    const std::string dir = s->queue.front();
    s->queue.pop_front();
    const std::string own = s->own_mount;
    g.unlock();
    nlohmann::json figures = measure(dir, s->cancel, own);
    g.lock();
    Result& r = s->results[dir];
    r.json = std::move(figures);
    r.when = std::chrono::steady_clock::now();
    r.measuring = false;
  }
  s->exited = true;
  s->cv.notify_all();
}

}  // namespace sup
