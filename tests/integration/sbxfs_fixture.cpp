#include "sbxfs_fixture.hpp"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

extern char** environ;

namespace sbxit {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- free helpers

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds interval) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(interval);
  }
  return pred();
}

FileResult read_file(const std::string& path) {
  FileResult r;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    r.err = errno;
    return r;
  }
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      r.err = errno;
      break;
    }
    if (n == 0) break;
    r.data.append(buf, static_cast<size_t>(n));
  }
  if (::close(fd) != 0 && r.err == 0) r.err = errno;
  return r;
}

int write_file(const std::string& path, std::string_view data, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = 0;
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

int mkdir_errno(const std::string& path) { return ::mkdir(path.c_str(), 0755) == 0 ? 0 : errno; }
int rmdir_errno(const std::string& path) { return ::rmdir(path.c_str()) == 0 ? 0 : errno; }
int stat_errno(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? 0 : errno;
}

std::vector<std::string> list_dir(const std::string& path, int* err) {
  std::vector<std::string> out;
  if (err) *err = 0;
  DIR* d = ::opendir(path.c_str());
  if (!d) {
    if (err) *err = errno;
    return out;
  }
  errno = 0;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
    errno = 0;
  }
  if (errno && err) *err = errno;
  ::closedir(d);
  return out;
}

static std::optional<std::string> proc_stat_field(pid_t pid, int field) {
  auto r = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (r.err) return std::nullopt;
  // Fields after the comm, which may hold spaces: start after the last ')'.
  auto close = r.data.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(r.data.substr(close + 2));
  std::string f;
  for (int i = 3; in >> f; ++i)
    if (i == field) return f;
  return std::nullopt;
}

bool pid_alive(pid_t pid) {
  if (pid <= 0) return false;
  auto st = proc_stat_field(pid, 3);
  return st && *st != "Z" && *st != "X";
}

std::string errno_name(int e) {
  switch (e) {
#define X(n) \
  case n:    \
    return #n;
    X(EPERM) X(ENOENT) X(ESRCH) X(EINTR) X(EIO) X(E2BIG) X(EBADF) X(EAGAIN) X(EACCES)
    X(EBUSY) X(EEXIST) X(ENOTDIR) X(EISDIR) X(EINVAL) X(ENOSPC) X(ENOTEMPTY) X(ENOTCONN)
    X(ECONNABORTED) X(ENOSYS) X(EROFS) X(EFBIG) X(ENAMETOOLONG) X(EOPNOTSUPP) X(ENOEXEC)
#undef X
    default:
      return "errno " + std::to_string(e);
  }
}

static std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  std::istringstream in(dirs);
  std::string d;
  while (std::getline(in, d, ':')) {
    std::string c = (d.empty() ? "." : d) + "/" + name;
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return name;
}

const std::string& python_path() {
  static const std::string path = [] {
    // pyenv shims are bash scripts; resolve the real interpreter once.
    std::string real;
    if (FILE* f = ::popen("python3 -c 'import sys; print(sys.executable)' 2>/dev/null", "r")) {
      char buf[4096];
      if (std::fgets(buf, sizeof buf, f)) real = buf;
      ::pclose(f);
    }
    while (!real.empty() && (real.back() == '\n' || real.back() == '\r')) real.pop_back();
    return real.empty() ? which("python3") : real;
  }();
  return path;
}

int sbxfs_mount_count(const std::string& mnt) {
  auto r = read_file("/proc/self/mountinfo");
  std::istringstream in(r.data);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::vector<std::string> f;
    std::string w;
    while (l >> w) f.push_back(w);
    if (f.size() < 7 || f[4] != mnt) continue;
    for (size_t i = 6; i + 1 < f.size(); ++i)
      if (f[i] == "-") {
        if (f[i + 1] == "fuse.sbxfs") ++n;
        break;
      }
  }
  return n;
}

json parse_json(const std::string& text) { return json::parse(text, nullptr, false); }

json step_of(const json& steps, const std::string& id, const std::string& kind) {
  json found;
  if (!steps.is_array()) return found;
  for (const json& s : steps)
    if (s.contains("bgId") && s.at("bgId") == id && s.contains("kind") && s.at("kind") == kind) found = s;  // bgId may be null
  return found;
}

bool blocked_in_fuse(pid_t pid) {
  const std::string w = read_file("/proc/" + std::to_string(pid) + "/wchan").data;
  return w.find("fuse") != std::string::npos || w.find("request_wait") != std::string::npos;
}

bool is_auto_id(const std::string& id) {
  static const std::regex re("^[0-9]{4,}$");
  return std::regex_match(id, re);
}

bool is_iso_time(const json& v) {
  static const std::regex re(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$)");
  return v.is_string() && std::regex_match(v.get<std::string>(), re);
}

std::string iso_time_ago(int seconds) {
  const std::time_t t = std::time(nullptr) - seconds;
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
  return buf;
}

// ---------------------------------------------------------------- children

namespace {

struct CStrings {
  std::vector<std::string> s;
  std::vector<char*> p;
  explicit CStrings(std::vector<std::string> v) : s(std::move(v)) {
    for (auto& x : s) p.push_back(x.data());
    p.push_back(nullptr);
  }
};

int decode_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}

/// Waits for `pid` (non-blocking polls) until the deadline.
std::optional<int> reap(pid_t pid, Clock::time_point deadline) {
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return decode_status(st);
    if (r < 0 && errno != EINTR) return std::nullopt;  // not our child / already reaped
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(10ms);
  }
}

}  // namespace

std::vector<std::string> SbxfsTest::child_env(const Env& extra) const {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env["MNT"] = mnt_;
  env["T"] = dir_;
  env["STATE"] = state_;
  env["PY"] = python_path();
  env["SBX_IT_DIR"] = dir_;  // the tag TearDown looks for in leftovers
  for (auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

RunResult SbxfsTest::run_argv(const std::vector<std::string>& argv_in, int timeout_sec, const Env& env) {
  RunResult res;
  std::vector<std::string> argv = {which("timeout"), std::to_string(timeout_sec), which(argv_in.at(0))};
  argv.insert(argv.end(), argv_in.begin() + 1, argv_in.end());
  CStrings cargv(argv), cenv(child_env(env));
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return res;
  }
  const auto t0 = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execve(cargv.p[0], cargv.p.data(), cenv.p.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    ::close(out[0]);
    ::close(err[0]);
    return res;
  }
  // `timeout` ends the command; our own deadline only guards against
  // grandchildren that keep the pipes open or a child stuck in the kernel.
  const auto deadline = t0 + std::chrono::seconds(timeout_sec + 5);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* bufs[2] = {&res.out, &res.err};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    int n = ::poll(fds, 2, static_cast<int>(std::min<long long>(left, 200)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        bufs[i]->append(buf, static_cast<size_t>(r));
      } else if (r == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  auto code = reap(pid, std::max(deadline, Clock::now() + 1s));
  if (!code) {
    ::kill(-pid, SIGKILL);
    code = reap(pid, Clock::now() + 2s);
  }
  res.code = code.value_or(-2);
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

RunResult SbxfsTest::run(const std::string& sh_command, int timeout_sec, const Env& env) {
  return run_argv({"/bin/sh", "-c", sh_command}, timeout_sec, env);
}

RunResult SbxfsTest::bash(const std::string& bash_command, int timeout_sec, const Env& env) {
  return run_argv({"bash", "-c", bash_command}, timeout_sec, env);
}

RunResult SbxfsTest::python(const std::string& code, int timeout_sec, const Env& env) {
  return run_argv({python_path(), "-c", code}, timeout_sec, env);
}

RunResult SbxfsTest::python_write(const std::string& rel, const std::string& text) {
  return run_argv({python_path(), "-c",
                   "import sys\n"
                   "with open(sys.argv[1], 'w') as f:\n"
                   "    f.write(sys.argv[2])\n",
                   p(rel), text});
}

pid_t SbxfsTest::spawn_bg(const std::string& sh_command, const std::string& out) {
  CStrings cargv({"/bin/sh", "-c", sh_command}), cenv(child_env({}));
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(devnull, 0);
    if (o >= 0) {
      ::dup2(o, 1);
      ::dup2(o, 2);
    }
    ::execve(cargv.p[0], cargv.p.data(), cenv.p.data());
    ::_exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return -1;
  }
  ::setpgid(pid, pid);  // also from here, so killpg works at once
  std::lock_guard g(mu_);
  bg_pids_.push_back(pid);
  return pid;
}

std::optional<int> SbxfsTest::wait_bg(pid_t pid, std::chrono::milliseconds timeout) {
  auto r = reap(pid, Clock::now() + timeout);
  if (r) {
    std::lock_guard g(mu_);
    std::erase(bg_pids_, pid);
  }
  return r;
}

pid_t SbxfsTest::trace(pid_t pid, const std::string& strace_args, std::string& why) {
  const std::string said = dir_ + "/strace-" + std::to_string(Clock::now().time_since_epoch().count()) + ".err";
  const pid_t tracer = spawn_bg("exec strace -f -p " + std::to_string(pid) + " " + strace_args, said);
  if (tracer <= 0) return -1;
  auto attached = [&] { return read_file(said).data.find("attached") != std::string::npos; };
  std::optional<int> gone;
  wait_until([&] {
    if (!gone) gone = wait_bg(tracer, std::chrono::milliseconds(0));
    return gone || attached();
  }, 10s);
  if (attached()) return tracer;
  why = read_file(said).data;
  if (!gone) {
    ::kill(tracer, SIGKILL);
    wait_bg(tracer, 5s);
  }
  return -1;
}

// ---------------------------------------------------------------- the tree

std::string SbxfsTest::start(const std::string& request) {
  auto r = run(R"(exec 3<>"$MNT/cmd" || exit 90
printf '%s\n' "$SBX_REQ" >&3 || exit 91
read -r id <&3 || exit 92
printf '%s\n' "$id")",
               20, {{"SBX_REQ", request}});
  std::string id = r.out;
  while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
  if (r.code != 0 || id.empty() || id.rfind("error", 0) == 0 || id.find('\n') != std::string::npos) {
    ADD_FAILURE() << "start(" << request.substr(0, 200) << ") failed: rc=" << r.code << " out=" << r.out
                  << " err=" << r.err;
    return "";
  }
  return id;
}

json SbxfsTest::status_json(const std::string& id) {
  auto r = read_file(p("procs/" + id + "/status.json"));
  if (r.err) {
    ADD_FAILURE() << "read procs/" << id << "/status.json: " << errno_name(r.err);
    return json(json::value_t::discarded);
  }
  auto j = parse_json(r.data);
  if (j.is_discarded()) ADD_FAILURE() << "procs/" << id << "/status.json is not JSON: " << r.data;
  return j;
}

json SbxfsTest::root_status() {
  auto r = read_file(p("status.json"));
  if (r.err) {
    ADD_FAILURE() << "read status.json: " << errno_name(r.err);
    return json(json::value_t::discarded);
  }
  auto j = parse_json(r.data);
  if (j.is_discarded()) ADD_FAILURE() << "status.json is not JSON: " << r.data;
  return j;
}

json SbxfsTest::wait_json(const std::string& id, int timeout_sec) {
  auto r = run("cat \"$MNT/procs/$ID/wait\"", timeout_sec + 2, {{"ID", id}});
  if (r.code != 0) {
    ADD_FAILURE() << "cat procs/" << id << "/wait: rc=" << r.code << " err=" << r.err;
    return json(json::value_t::discarded);
  }
  auto j = parse_json(r.out);
  if (j.is_discarded()) ADD_FAILURE() << "procs/" << id << "/wait is not JSON: " << r.out;
  return j;
}

json SbxfsTest::wait_ended(const std::string& id, std::chrono::milliseconds timeout) {
  json last;
  bool ok = wait_until(
      [&] {
        auto r = read_file(p("procs/" + id + "/status.json"));
        if (r.err) return false;
        last = parse_json(r.data);
        return !last.is_discarded() && last.value("running", true) == false;
      },
      timeout, 50ms);
  if (!ok) ADD_FAILURE() << "procs/" << id << " did not end in time; last status: " << last.dump();
  return last;
}

std::string SbxfsTest::file(const std::string& rel) {
  auto r = read_file(p(rel));
  if (r.err) ADD_FAILURE() << "read " << rel << ": " << errno_name(r.err);
  return r.data;
}

std::vector<std::string> SbxfsTest::procs() {
  int err = 0;
  auto v = list_dir(p("procs"), &err);
  if (err) ADD_FAILURE() << "readdir procs: " << errno_name(err);
  return v;
}

bool SbxfsTest::has_step(const std::string& kind, const std::string& id) {
  return step_of(parse_json(read_file(p("steps.json")).data), id, kind).is_object();
}

std::vector<json> SbxfsTest::errors() {
  std::vector<json> out;
  auto r = read_file(p("errors"));
  if (r.err) {
    ADD_FAILURE() << "read errors: " << errno_name(r.err);
    return out;
  }
  std::istringstream in(r.data);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = parse_json(line);
    if (j.is_discarded()) ADD_FAILURE() << "errors line is not JSON: " << line;
    out.push_back(j);
  }
  return out;
}

// ---------------------------------------------------------------- the daemon

pid_t SbxfsTest::daemon_pid() const {
  std::lock_guard g(mu_);
  return daemon_pid_;
}

std::string SbxfsTest::daemon_log() const {
  std::string s = read_file(log_path_).data;
  auto bg = read_file(state_ + "/sbxfs.log");
  if (!bg.err && !bg.data.empty()) s += "\n--- " + state_ + "/sbxfs.log ---\n" + bg.data;
  return s;
}

bool SbxfsTest::wait_mounted(pid_t pid, std::chrono::milliseconds timeout) {
  bool died = false;
  bool ok = wait_until(
      [&] {
        bool child;
        {
          std::lock_guard g(mu_);
          child = daemon_is_child_;
        }
        if (child) {
          int st;
          if (::waitpid(pid, &st, WNOHANG) == pid) {
            died = true;
            std::lock_guard g(mu_);
            daemon_pid_ = 0;
            return true;
          }
        } else if (!pid_alive(pid)) {
          died = true;
          return true;
        }
        // A real request, not stat(): a stale mount may answer stat() from
        // its attribute cache. The answer must come from this daemon.
        if (sbxfs_mount_count(mnt_) == 0) return false;
        auto r = read_file(p("status.json"));
        if (r.err) return false;
        auto j = parse_json(r.data);
        if (!j.is_object() || !j.contains("supervisor") || j["supervisor"].value("pid", 0) != pid) return false;
        // Its cgroup subtree, removed at the end if a daemon killed here left it.
        if (const json& sub = j["supervisor"]; sub.contains("cgroup") && sub["cgroup"].is_string() &&
                                                sub.value("tracking", "") == "cgroup") {
          std::lock_guard g(mu_);
          cgroup_subtrees_.insert(sub["cgroup"].get<std::string>());
        }
        return true;
      },
      timeout);
  if (died) {
    ADD_FAILURE() << "sbxfs exited before mounting";
    return false;
  }
  if (!ok) ADD_FAILURE() << "sbxfs did not mount " << mnt_ << " in time";
  return ok;
}

bool SbxfsTest::start_daemon(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = daemon_wrapper_;
  argv.insert(argv.end(), {SBXFS_PATH, "-f", "--state-dir", state_});
  argv.insert(argv.end(), daemon_options_.begin(), daemon_options_.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(mnt_);
  CStrings cargv(argv), cenv(child_env({}));
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY);
    int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(devnull, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    if (::chdir("/") != 0) ::_exit(126);
    ::execve(cargv.p[0], cargv.p.data(), cenv.p.data());
    ::_exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return false;
  }
  {
    std::lock_guard g(mu_);
    daemon_pid_ = pid;
    daemon_is_child_ = true;
  }
  return wait_mounted(pid, 10s);
}

void SbxfsTest::adopt_daemon(pid_t pid) {
  std::lock_guard g(mu_);
  daemon_pid_ = pid;
  daemon_is_child_ = false;
}

int SbxfsTest::kill_daemon(int sig, bool do_reap) {
  pid_t pid;
  bool child;
  {
    std::lock_guard g(mu_);
    pid = daemon_pid_;
    child = daemon_is_child_;
  }
  if (pid <= 0) return -1;
  ::kill(pid, sig);
  if (!do_reap) return -2;
  std::optional<int> code;
  if (child) {
    code = reap(pid, Clock::now() + 5s);
  } else if (wait_until([&] { return !pid_alive(pid); }, 5s)) {
    code = 0;
  }
  if (!code) return -2;
  std::lock_guard g(mu_);
  if (daemon_pid_ == pid) daemon_pid_ = 0;
  return *code;
}

bool SbxfsTest::restart_daemon() {
  int code = kill_daemon(SIGKILL);
  if (code != 128 + SIGKILL && code != 0) ADD_FAILURE() << "kill -9 of the daemon gave " << code;
  return start_daemon();
}

// ---------------------------------------------------------------- watchdog

void SbxfsTest::extend_watchdog(std::chrono::seconds extra) {
  std::lock_guard g(mu_);
  watchdog_deadline_ += extra;
}

void SbxfsTest::watchdog_loop() {
  std::unique_lock g(mu_);
  for (;;) {
    if (watchdog_stop_) return;
    if (Clock::now() >= watchdog_deadline_ && !watchdog_fired_) {
      watchdog_fired_ = true;
      // Killing the daemon aborts the FUSE connection: every call blocked in
      // it returns, so the test (or TearDown) can carry on and fail.
      if (daemon_pid_ > 0) ::kill(daemon_pid_, SIGKILL);
      for (pid_t b : bg_pids_) ::kill(-b, SIGKILL);
      ADD_FAILURE() << "watchdog: the test overran its time budget; killed the daemon";
    }
    watchdog_cv_.wait_until(g, watchdog_fired_ ? Clock::now() + 1h : watchdog_deadline_);
  }
}

// ---------------------------------------------------------------- SetUp / TearDown

void SbxfsTest::SetUp() {
  char tmpl[] = "/tmp/sbxit-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr) << std::strerror(errno);
  dir_ = tmpl;
  mnt_ = dir_ + "/mnt";
  state_ = dir_ + "/state";
  log_path_ = dir_ + "/daemon.log";
  ASSERT_EQ(mkdir_errno(mnt_), 0);
  ASSERT_EQ(mkdir_errno(state_), 0);
  {
    std::lock_guard g(mu_);
    watchdog_deadline_ = Clock::now() + watchdog_budget_;
  }
  watchdog_ = std::thread([this] { watchdog_loop(); });
  ASSERT_TRUE(start_daemon()) << daemon_log();
}

void SbxfsTest::stop_all_commands() {
  // Every running command, in parallel, each stop bounded.
  run(R"(cd "$MNT/procs" 2>/dev/null || exit 0
for d in *; do
  [ -d "$d" ] || continue
  if grep -Eq '"running": *true' "$d/status.json" 2>/dev/null; then
    timeout 10 sh -c 'echo > "$1/stop"' _ "$d" &
  fi
done
wait)",
      15);
}

void SbxfsTest::unmount_all() {
  for (int i = 0; i < 5 && sbxfs_mount_count(mnt_) > 0; ++i) {
    auto r = run_argv({"fusermount3", "-u", mnt_}, 10);
    if (r.code != 0) run_argv({"fusermount3", "-uz", mnt_}, 10);
  }
}

void SbxfsTest::kill_leftovers() {
  if (dir_.empty()) return;
  const std::string tag = "SBX_IT_DIR=" + dir_;
  const pid_t self = ::getpid(), parent = ::getppid();
  // pids named in the state directory (command roots and monitors), checked
  // against their start time so that a reused pid is left alone.
  std::vector<std::pair<pid_t, std::string>> recorded;
  for (auto& id : list_dir(state_ + "/procs")) {
    auto j = parse_json(read_file(state_ + "/procs/" + id + "/monitor.json").data);
    if (!j.is_object()) continue;
    for (auto [pk, sk] : {std::pair{"pid", "pidStart"}, std::pair{"monitorPid", "monitorStart"}}) {
      if (j.contains(pk) && j[pk].is_number_integer())
        recorded.emplace_back(j[pk].get<pid_t>(), !j.contains(sk)          ? std::string()
                                                  : j[sk].is_string() ? j[sk].get<std::string>()
                                                                      : j[sk].dump());
    }
  }
  for (int round = 0; round < 50; ++round) {
    std::set<pid_t> victims;
    for (auto& [pid, start] : recorded) {
      auto st = proc_stat_field(pid, 22);
      if (st && (start.empty() || *st == start) && pid_alive(pid)) {
        victims.insert(pid);
        ::kill(-pid, SIGKILL);  // the command's process group
      }
    }
    for (auto& e : list_dir("/proc")) {
      if (e.empty() || !std::isdigit(static_cast<unsigned char>(e[0]))) continue;
      pid_t pid = std::atoi(e.c_str());
      if (pid == self || pid == parent || !pid_alive(pid)) continue;
      auto env = read_file("/proc/" + e + "/environ").data;
      auto cmdline = read_file("/proc/" + e + "/cmdline").data;
      bool tagged = false;
      for (size_t pos = 0; pos < env.size();) {
        size_t end = env.find('\0', pos);
        if (end == std::string::npos) end = env.size();
        if (env.compare(pos, end - pos, tag) == 0) tagged = true;
        pos = end + 1;
      }
      if (tagged || cmdline.find(dir_ + "/") != std::string::npos) victims.insert(pid);
    }
    if (victims.empty()) return;
    if (round == 0)
      for (pid_t v : victims) {
        auto cl = read_file("/proc/" + std::to_string(v) + "/cmdline").data;
        std::replace(cl.begin(), cl.end(), '\0', ' ');
        if (cl.empty()) cl = "[" + read_file("/proc/" + std::to_string(v) + "/comm").data + "]";
        while (!cl.empty() && (cl.back() == '\n' || cl.back() == ' ')) cl.pop_back();
        std::fprintf(stderr, "[sbxfs fixture] killing leftover pid %d: %s\n", v, cl.c_str());
      }
    for (pid_t v : victims) ::kill(v, SIGKILL);
    // Our own children (bg helpers) become zombies until reaped.
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
    std::this_thread::sleep_for(50ms);
  }
}

// The cgroups of commands whose monitors were killed here while no daemon
// ran (a daemon would have removed them), and the subtrees of this test's
// daemons once empty (with `live`, the child a daemon killed here left
// holding it).
void SbxfsTest::remove_leftover_cgroups() {
  std::set<std::string> subtrees;
  {
    std::lock_guard g(mu_);
    subtrees = cgroup_subtrees_;  // also those no record names (a daemon killed before any start)
  }
  for (auto& id : list_dir(state_ + "/procs")) {
    auto j = parse_json(read_file(state_ + "/procs/" + id + "/monitor.json").data);
    if (!j.is_object() || !j.contains("cgroup") || !j["cgroup"].is_string()) continue;
    const std::string cg = j["cgroup"];
    subtrees.insert(cg.substr(0, cg.rfind('/')));
    if (stat_errno(cg) != 0) continue;
    (void)write_file(cg + "/cgroup.kill", "1");
    wait_until([&] { return read_file(cg + "/cgroup.events").data.find("populated 0") != std::string::npos; }, 5s);
    rmdir_errno(cg);
  }
  for (const std::string& subtree : subtrees) {
    if (daemon_pid() <= 0) rmdir_errno(subtree + "/live");
    rmdir_errno(subtree);  // EBUSY while others are in it
  }
}

void SbxfsTest::TearDown() {
  if (dir_.empty()) return;
  {
    std::lock_guard g(mu_);
    if (!watchdog_fired_) watchdog_deadline_ = Clock::now() + 60s;
  }
  // 1. Stop every running command through the tree (if it still answers).
  if (daemon_pid() > 0 && sbxfs_mount_count(mnt_) > 0) stop_all_commands();
  // 2. The test's own background processes.
  std::vector<pid_t> bg;
  {
    std::lock_guard g(mu_);
    bg = bg_pids_;
  }
  for (pid_t b : bg) ::kill(-b, SIGKILL);
  // 3. Unmount; 4. end the daemon (it exits on unmount; TERM, then KILL).
  unmount_all();
  if (daemon_pid() > 0) {
    int code = kill_daemon(SIGTERM);
    if (code == -2) kill_daemon(SIGKILL);
  }
  unmount_all();  // a stale mount left by a killed daemon
  {
    std::lock_guard g(mu_);
    watchdog_stop_ = true;
  }
  watchdog_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  // 5. Anything left that was started for this test.
  kill_leftovers();
  remove_leftover_cgroups();
  for (pid_t b : bg) reap(b, Clock::now() + 2s);
  {
    std::lock_guard g(mu_);
    bg_pids_.clear();
  }
  // 6. A sanitizer report from the daemon (its stderr is the log) fails the
  //    test even when the tree kept answering; then the log when it failed.
  {
    const std::string log = daemon_log();
    for (const char* report : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", ": runtime error: "}) {
      if (log.find(report) != std::string::npos) ADD_FAILURE() << "the daemon's log holds a sanitizer report: " << report;
    }
  }
  if (HasFailure()) {
    std::string log = daemon_log();
    if (log.size() > 64 * 1024) log = "[...]\n" + log.substr(log.size() - 64 * 1024);
    std::fprintf(stderr, "----- sbxfs log (%s) -----\n%s\n----- end of sbxfs log -----\n",
                 log_path_.c_str(), log.c_str());
  }
  // 7. Remove the temp dir, never through a mount.
  if (sbxfs_mount_count(mnt_) > 0) {
    ADD_FAILURE() << mnt_ << " is still mounted; leaving " << dir_;
    return;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (ec) std::fprintf(stderr, "[sbxfs fixture] could not remove %s: %s\n", dir_.c_str(), ec.message().c_str());
}

}  // namespace sbxit
