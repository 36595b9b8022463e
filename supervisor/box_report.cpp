#include "supervisor/box_report.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <optional>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <unordered_set>

#include "supervisor/clock.hpp"
#include "supervisor/own_mount.hpp"

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
  std::unordered_set<ino_t> linked;  ///< files of several names counted already: once, as du does

  /// The bytes `st` adds: none for a further name of a file counted already.
  std::uint64_t bytes(const struct stat& st) {
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1 && !linked.insert(st.st_ino).second) return 0;
    return static_cast<std::uint64_t>(st.st_blocks) * 512;
  }
};

/// An entry's type, blocks and file system, from the kernel's cached
/// attributes where a file system has its own server (FUSE, NFS): the root
/// of another mount below the walk is never asked, so a server that does
/// not answer does not stop the walk.
bool stat_entry(int dirfd, const char* name, struct stat* st) {
  struct statx x {};
  if (::statx(dirfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
              STATX_TYPE | STATX_MODE | STATX_BLOCKS | STATX_INO | STATX_NLINK, &x) != 0)
    return false;
  st->st_mode = x.stx_mode;
  st->st_ino = static_cast<ino_t>(x.stx_ino);
  st->st_nlink = static_cast<nlink_t>(x.stx_nlink);
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
    total += w.bytes(st);
    if (S_ISDIR(st.st_mode)) {
      const int sub = ::openat(::dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) total += du_dir(sub, w);
    }
  }
  ::closedir(d);
  return total;
}

/// {path, measuredAt, totalBytes, entries: [{name, bytes}] (largest first), partial}
nlohmann::json measure(const std::string& dir, const std::atomic<bool>& cancel, const OwnMount& own) {
  nlohmann::json j = {{"path", dir}};
  const std::optional<std::string> real = own.outside(dir);
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
  Walk w{.dev = top.st_dev, .cancel = &cancel, .linked = {}};
  std::vector<std::pair<std::string, std::uint64_t>> entries;
  std::uint64_t total = 0;
  DIR* d = ::fdopendir(fd);
  while (d) {
    dirent* e = ::readdir(d);
    if (!e) break;
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    struct stat st {};
    if (!stat_entry(::dirfd(d), e->d_name, &st) || st.st_dev != w.dev) continue;
    std::uint64_t bytes = w.bytes(st);
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

nlohmann::json disk_json(const std::string& state_dir, const OwnMount& own) {
  const std::pair<const char*, std::string> places[] = {
      {"stateDir", state_dir}, {"root", "/"}, {"tmp", "/tmp"}, {"shm", "/dev/shm"}};
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::pair<dev_t, std::string>> seen;
  for (const auto& [what, path] : places) {
    nlohmann::json j = {{"what", what}, {"path", path}};
    if (own.holds(path)) {  // a mount point there (not looked at: own_mount.hpp)
      j["error"] = "sbxfs's own mount";
      out.push_back(std::move(j));
      continue;
    }
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

void WorkDirSizes::keep_out(const OwnMount& own_mount) {
  std::lock_guard g(state_->mu);
  state_->own_mount = own_mount;
}

void WorkDirSizes::report(const std::vector<std::string>& dirs, nlohmann::json& measured,
                          nlohmann::json& not_measured) {
  const auto now = std::chrono::steady_clock::now();
  bool queued = false;
  std::lock_guard g(state_->mu);
  std::erase_if(state_->results,
                [&](const auto& kv) { return !kv.second.measuring && now - kv.second.asked >= kForgetAfter; });
  for (const std::string& dir : dirs) {
    Result& r = state_->results[dir];
    r.asked = now;
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
    const OwnMount own = s->own_mount;
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
