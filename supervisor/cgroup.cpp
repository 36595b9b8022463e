#include "supervisor/cgroup.hpp"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

namespace sup {

namespace {

constexpr const char* kWanted[] = {"memory", "cpu", "pids"};

int write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n;
  do {
    n = ::write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  int e = n < 0 ? errno : 0;
  ::close(fd);
  return e;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find_first_of(" \t\n", i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

// The value of `key` in a flat-keyed file ("populated 1\nfrozen 0\n").
std::optional<std::uint64_t> keyed(const std::string& text, const char* key) {
  const size_t klen = ::strlen(key);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (text.compare(pos, klen, key) == 0 && pos + klen < eol && text[pos + klen] == ' ')
      return std::strtoull(text.c_str() + pos + klen + 1, nullptr, 10);
    pos = eol + 1;
  }
  return std::nullopt;
}

bool is_cgroup2(const std::string& dir) {
  struct statfs sf{};
  return ::statfs(dir.c_str(), &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

// Mount point of the cgroup2 filesystem, from /proc/self/mountinfo.
std::optional<std::string> cgroup2_mount() {
  auto text = read_cgroup_file("/proc/self/mountinfo");
  if (!text) return std::nullopt;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t eol = text->find('\n', pos);
    if (eol == std::string::npos) eol = text->size();
    std::string line = text->substr(pos, eol - pos);
    pos = eol + 1;
    size_t sep = line.find(" - ");
    if (sep == std::string::npos || line.compare(sep + 3, 8, "cgroup2 ") != 0) continue;
    std::vector<std::string> f = words(line.substr(0, sep));
    if (f.size() >= 5) return f[4];  // octal escapes (\040) only in odd mount points
  }
  return std::nullopt;
}

// This process's cgroup v2 path ("0::/PATH" in /proc/self/cgroup).
std::optional<std::string> own_cgroup() {
  auto text = read_cgroup_file("/proc/self/cgroup");
  if (!text) return std::nullopt;
  size_t at = text->rfind("0::", 0) == 0 ? 0 : text->find("\n0::");
  if (at == std::string::npos) return std::nullopt;
  at += at == 0 ? 3 : 4;
  size_t eol = text->find('\n', at);
  return text->substr(at, eol == std::string::npos ? std::string::npos : eol - at);
}

// Enables the wanted controllers that `dir` offers below it; true when each
// either worked or was not offered (EBUSY: processes in `dir` forbid it).
bool enable_controllers(const std::string& dir, int* busy) {
  std::vector<std::string> offered = words(read_cgroup_file(dir + "/cgroup.controllers").value_or(""));
  for (const char* c : kWanted) {
    if (std::find(offered.begin(), offered.end(), c) == offered.end()) continue;
    int e = write_text(dir + "/cgroup.subtree_control", std::string("+") + c);
    if (e == EBUSY) *busy = EBUSY;
  }
  return *busy == 0;
}

}  // namespace

std::optional<std::string> read_cgroup_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      if (n < 0) return std::nullopt;
      return out;
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

bool CgroupHierarchy::has(const std::string& controller) const {
  return std::find(controllers.begin(), controllers.end(), controller) != controllers.end();
}

std::string cgroup_key(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char out[17];
  snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

int move_to_daemon_leaf(const std::string& base, const std::vector<pid_t>& pids) {
  const std::string leaf = base + "/daemon";
  if (::mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) return errno;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    const int e = write_text(leaf + "/cgroup.procs", std::to_string(pids[i]));
    if (e != 0 && (i == 0 || e != ESRCH)) return e;
  }
  return 0;
}

std::optional<CgroupHierarchy> find_cgroup_hierarchy(const std::string& mode, const std::string& key,
                                                     std::string* why, const std::vector<pid_t>& companions) {
  CgroupHierarchy h;
  if (mode == "off") {
    *why = "turned off (-o cgroup=off)";
    return std::nullopt;
  }
  if (!mode.empty()) {
    h.base = mode;
    while (h.base.size() > 1 && h.base.back() == '/') h.base.pop_back();
    if (!is_cgroup2(h.base)) {
      *why = h.base + " is not a directory of a cgroup v2 filesystem";
      return std::nullopt;
    }
  } else {
    auto mount = cgroup2_mount();
    auto own = own_cgroup();
    if (!mount || !own) {
      *why = "no cgroup v2 hierarchy is mounted";
      return std::nullopt;
    }
    h.base = *mount + (*own == "/" ? "" : *own);
  }
  if (::access((h.base + "/cgroup.procs").c_str(), W_OK) != 0 || ::access(h.base.c_str(), W_OK) != 0) {
    *why = h.base + " is not writable (" + ::strerror(errno) + "): give sbxfs a delegated cgroup";
    return std::nullopt;
  }
  int busy = 0;
  if (!enable_controllers(h.base, &busy)) {
    // A delegated unit's own cgroup holds the daemon: move it to a leaf, so
    // that the controllers may be enabled for the commands' cgroups.
    std::vector<pid_t> movers{::getpid()};
    movers.insert(movers.end(), companions.begin(), companions.end());
    if (move_to_daemon_leaf(h.base, movers) == 0) {
      busy = 0;
      enable_controllers(h.base, &busy);
    }
  }
  h.subtree = h.base + "/sbxfs-" + key;
  // What the base passes on, the subtree passes on to each command.
  std::vector<std::string> on = words(read_cgroup_file(h.base + "/cgroup.subtree_control").value_or(""));
  for (const char* c : kWanted)
    if (std::find(on.begin(), on.end(), c) != on.end()) h.controllers.push_back(c);
  return h;
}

namespace {
// An empty child that keeps the subtree while the daemon runs, so that a
// start does not make it (mkdir, controllers) and its end remove it again:
// about 0.2 ms of a lone command's round trip. Never a command's name.
constexpr char kHold[] = "/live";
}  // namespace

std::string command_cgroup_name(const std::string& id, std::uint64_t n) {
  return "cmd-" + id + "-" + std::to_string(n);
}

std::optional<std::string> command_cgroup_id(const std::string& name) {
  const std::size_t dash = name.rfind('-');
  if (name.rfind("cmd-", 0) != 0 || dash == std::string::npos || dash <= 4) return std::nullopt;
  return name.substr(4, dash - 4);
}

int create_command_cgroup(const CgroupHierarchy& h, const std::string& name, Cgroup* out) {
  Cgroup cg(h.subtree + "/" + name);
  int e = 0;
  // The subtree may go at any time with its last command (its monitor
  // removes it) while the daemon does not hold it.
  for (int attempt = 0; attempt < 5; ++attempt) {
    e = cg.create();
    if (e != ENOENT) break;
    if (::mkdir(h.subtree.c_str(), 0755) != 0 && errno != EEXIST) return errno;
    for (const std::string& c : h.controllers) write_text(h.subtree + "/cgroup.subtree_control", "+" + c);
    ::mkdir((h.subtree + kHold).c_str(), 0755);
  }
  if (e == 0) *out = cg;
  return e;
}

void hold_cgroup_hierarchy(const CgroupHierarchy& h) {
  if (!h.subtree.empty()) ::mkdir((h.subtree + kHold).c_str(), 0755);  // ENOENT: no subtree, nothing to hold
}

void release_cgroup_hierarchy(const CgroupHierarchy& h) {
  if (h.subtree.empty()) return;
  ::rmdir((h.subtree + kHold).c_str());
  ::rmdir(h.subtree.c_str());  // EBUSY while commands run: the last one's monitor removes it
}

int Cgroup::create() const {
  if (::mkdir(path_.c_str(), 0755) == 0) return 0;
  if (errno != EEXIST) return errno;
  if (populated()) return EBUSY;
  if (int e = remove()) return e;
  return ::mkdir(path_.c_str(), 0755) == 0 ? 0 : errno;
}

int Cgroup::remove() const {
  // Child cgroups (a command may make its own where it is delegated) go
  // first; looked for only when the plain rmdir says there are some.
  if (::rmdir(path_.c_str()) != 0 && errno != ENOENT) {
    if (errno != EBUSY && errno != ENOTEMPTY) return errno;
    if (DIR* d = ::opendir(path_.c_str())) {
      std::vector<std::string> subs;
      while (struct dirent* de = ::readdir(d))
        if (de->d_type == DT_DIR && ::strcmp(de->d_name, ".") != 0 && ::strcmp(de->d_name, "..") != 0)
          subs.push_back(de->d_name);
      ::closedir(d);
      for (const std::string& s : subs) Cgroup(path_ + "/" + s).remove();
    }
    if (::rmdir(path_.c_str()) != 0 && errno != ENOENT) return errno;
  }
  const size_t slash = path_.rfind('/');
  if (slash != std::string::npos && path_.compare(path_.rfind('/', slash - 1) + 1, 6, "sbxfs-") == 0)
    ::rmdir(path_.substr(0, slash).c_str());  // EBUSY while other commands run or the daemon holds it
  return 0;
}

bool Cgroup::exists() const {
  struct stat st{};
  return ::stat(path_.c_str(), &st) == 0;
}

int Cgroup::open_procs() const { return ::open((path_ + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC); }

int Cgroup::open_dir() const { return ::open(path_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC); }

int Cgroup::open_events() const { return ::open((path_ + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC); }

bool Cgroup::populated() const {
  auto t = read_cgroup_file(path_ + "/cgroup.events");
  return t && keyed(*t, "populated").value_or(0) != 0;
}

bool Cgroup::populated(int events_fd) {
  char buf[256];
  ssize_t n;
  do {
    n = ::pread(events_fd, buf, sizeof buf - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  return keyed(std::string(buf, static_cast<size_t>(n)), "populated").value_or(0) != 0;
}

bool Cgroup::wait_empty(std::chrono::milliseconds limit) const {
  int fd = open_events();
  if (fd < 0) return true;  // gone
  const auto end = std::chrono::steady_clock::now() + limit;
  bool empty = !populated(fd);
  while (!empty) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    struct pollfd p = {fd, POLLPRI, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    empty = !populated(fd);
  }
  ::close(fd);
  return empty;
}

int Cgroup::destroy(std::chrono::milliseconds limit) const {
  kill();  // ENOENT: gone already, or a kernel without cgroup.kill (then the wait tells)
  if (!wait_empty(limit)) return EBUSY;
  return remove();
}

namespace {

/// The pids of `dir`/cgroup.procs and of every cgroup below it (a command
/// may make its own, as a container runtime or an sbxfs run as a command
/// does: cgroup.procs lists a folder's own members only).
void members_below(const std::string& dir, std::vector<pid_t>& out, int depth) {
  if (auto t = read_cgroup_file(dir + "/cgroup.procs")) {
    const char* p = t->c_str();
    while (*p) {
      char* end = nullptr;
      long v = std::strtol(p, &end, 10);
      if (end == p) break;
      if (v > 0) out.push_back(static_cast<pid_t>(v));
      p = end;
      while (*p == '\n') ++p;
    }
  }
  if (depth >= 64) return;  // deeper than anything real; the kill still ends them all
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> subs;
  while (dirent* e = ::readdir(d))
    if (e->d_type == DT_DIR && e->d_name[0] != '.') subs.push_back(dir + "/" + e->d_name);
  ::closedir(d);
  for (const std::string& sub : subs) members_below(sub, out, depth + 1);
}

}  // namespace

std::vector<pid_t> Cgroup::members() const {
  std::vector<pid_t> out;
  members_below(path_, out, 0);
  return out;
}

std::size_t Cgroup::signal_members(int sig, bool also_cont, pid_t own_child) const {
  std::size_t n = 0;
  // A member forks while the list is read and signalled: the list is read
  // again, and whoever is new gets the signal too, until a look finds no
  // one new (a bounded number of times: a member that takes the signal and
  // forks on has its later children after the write). Each process gets it once.
  std::set<pid_t> signalled;
  std::vector<pid_t> listed = members();
  for (int round = 0; round < kSignalRounds; ++round) {
    // pidfds first, then the list again: a pidfd whose pid is still listed
    // is a member (a pid names one live process at a time).
    std::vector<std::pair<pid_t, int>> fds;
    bool found = false;
    for (pid_t p : listed) {
      if (signalled.count(p)) continue;
      found = true;
      if (p == own_child && own_child > 0) {
        signalled.insert(p);
        if (::kill(p, sig) == 0) ++n;
        if (also_cont) ::kill(p, SIGCONT);
        continue;
      }
      int fd = static_cast<int>(::syscall(SYS_pidfd_open, p, 0));
      if (fd >= 0) fds.emplace_back(p, fd);
    }
    if (!found) break;
    if (fds.empty() && round > 0) break;
    listed = members();
    const std::set<pid_t> now(listed.begin(), listed.end());
    for (auto& [p, fd] : fds) {
      if (now.count(p)) {
        signalled.insert(p);
        if (::syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0) == 0) ++n;
        if (also_cont) ::syscall(SYS_pidfd_send_signal, fd, SIGCONT, nullptr, 0);
      }
      ::close(fd);
    }
  }
  return n;
}

int Cgroup::kill() const { return write_text(path_ + "/cgroup.kill", "1"); }

int Cgroup::freeze(bool on) const { return write_text(path_ + "/cgroup.freeze", on ? "1" : "0"); }

bool Cgroup::frozen() const {
  auto t = read_cgroup_file(path_ + "/cgroup.freeze");
  return t && !t->empty() && (*t)[0] == '1';
}

std::optional<std::uint64_t> Cgroup::cpu_usec() const {
  auto t = read_cgroup_file(path_ + "/cpu.stat");
  if (!t) return std::nullopt;
  return keyed(*t, "usage_usec");
}

int Cgroup::open_cpu_stat() const { return ::open((path_ + "/cpu.stat").c_str(), O_RDONLY | O_CLOEXEC); }

std::optional<std::uint64_t> Cgroup::cpu_usec(int stat_fd) {
  char buf[1024];
  ssize_t n;
  do {
    n = ::pread(stat_fd, buf, sizeof buf - 1, 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  return keyed(std::string(buf, static_cast<size_t>(n)), "usage_usec");
}

std::optional<std::uint64_t> Cgroup::oom_kills() const {
  auto t = read_cgroup_file(path_ + "/memory.events");
  if (!t) return std::nullopt;
  return keyed(*t, "oom_kill");
}

int Cgroup::set(const char* file, const std::string& value) const { return write_text(path_ + "/" + file, value); }

}  // namespace sup
