#pragma once
// Shared helpers of the supervisor unit tests: a temp state directory that
// removes itself, bounded waits, /proc probes, and a fixture that marks every
// command it starts with SBX_TEST_MARKER=<unique> so TearDown can prove (and
// force) that nothing it started is left, even when an assertion failed.
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "supervisor/command_status.hpp"
#include "supervisor/error.hpp"
#include "supervisor/exit_record.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/spec.hpp"
#include "supervisor/supervisor.hpp"

#ifndef SBX_MONITOR_PATH
#error "SBX_MONITOR_PATH must name the built sbxfs-monitor"
#endif

namespace sup {
// gtest prints Errc values by name.
inline const char* errc_name(Errc c) { return errc_id(c); }
inline void PrintTo(Errc c, std::ostream* os) { *os << errc_name(c); }
}  // namespace sup

namespace sbxtest {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline constexpr const char* kMarkerVar = "SBX_TEST_MARKER";

inline std::string describe(const sup::Error& e) {
  return std::string(sup::errc_name(e.code)) + ": " + e.message;
}

// Fails the current test (fatally / not) when a Result is an error, printing
// it; more context may be streamed after the macro.
#define SBX_ASSERT_OK(expr)                               \
  switch (0)                                              \
  case 0:                                                 \
  default:                                                \
    if (const auto& sbx_r_ = (expr); sbx_r_.ok()) {       \
    } else                                                \
      FAIL() << #expr << " failed: " << ::sbxtest::describe(sbx_r_.error()) << " "

#define SBX_EXPECT_OK(expr)                               \
  switch (0)                                              \
  case 0:                                                 \
  default:                                                \
    if (const auto& sbx_r_ = (expr); sbx_r_.ok()) {       \
    } else                                                \
      ADD_FAILURE() << #expr << " failed: " << ::sbxtest::describe(sbx_r_.error()) << " "

/// Polls `pred` every `step` until it holds or `timeout` passed. True if it held.
inline bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                       std::chrono::milliseconds step = 5ms) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return pred();
    std::this_thread::sleep_for(step);
  }
}

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// A directory under /tmp that is removed (recursively) when it goes away.
class TempDir {
 public:
  explicit TempDir(const char* tag = "sbx-ut") {
    std::string tmpl = std::string("/tmp/") + tag + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The bytes of a record's stream, `DIR/stdout` or `DIR/stderr`, as the
/// log's index gives them (the monitor keeps no file of that name).
inline std::string read_stream(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  sup::LogIndex index;
  if (index.open(path.substr(0, slash)) != 0) return "";
  const sup::LogStream s = path.substr(slash + 1) == "stderr" ? sup::LogStream::err : sup::LogStream::out;
  std::string out;
  EXPECT_EQ(index.read_stream(s, 0, static_cast<std::size_t>(index.stream_size(s)), &out), 0) << path;
  return out;
}

inline bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

/// Waits (bounded) until the file at `path` contains `needle`.
inline bool wait_for_text(const std::string& path, const std::string& needle,
                          std::chrono::milliseconds timeout = 5000ms) {
  return wait_until([&] { return read_file(path).find(needle) != std::string::npos; }, timeout);
}

/// Parses a JSON file; nullopt when missing or not JSON.
inline std::optional<nlohmann::json> read_json(const std::string& path) {
  std::string text = read_file(path);
  if (text.empty()) return std::nullopt;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

/// Fields after "pid (comm)" of /proc/PID/stat, split on spaces; field 3 is [0].
inline std::vector<std::string> proc_stat_fields(pid_t pid) {
  std::string text = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream in(text.substr(close + 1));
  std::vector<std::string> out;
  std::string f;
  while (in >> f) out.push_back(f);
  return out;
}

/// The process exists and is not a zombie (an unreaped corpse runs nothing).
inline bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  auto f = proc_stat_fields(pid);
  if (f.empty()) return false;
  return f[0] != "Z" && f[0] != "X";
}

/// utime + stime (fields 14, 15) of /proc/PID/stat in clock ticks; 0 when gone.
/// For a process (not a task) this sums all its threads, dead ones included.
inline unsigned long long proc_cpu_ticks(pid_t pid) {
  auto f = proc_stat_fields(pid);
  if (f.size() < 13) return 0;
  return std::stoull(f[11]) + std::stoull(f[12]);
}

inline std::string proc_cmdline(pid_t pid) {
  return read_file("/proc/" + std::to_string(pid) + "/cmdline");
}

/// Every live (non-zombie) process whose environment holds exactly `entry`
/// ("NAME=VALUE"), this process excluded.
inline std::vector<pid_t> pids_with_env(const std::string& entry) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  const pid_t self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == self) continue;
    std::string env = read_file(std::string("/proc/") + e->d_name + "/environ");
    size_t pos = 0;
    bool found = false;
    while (pos < env.size()) {
      size_t nul = env.find('\0', pos);
      if (nul == std::string::npos) nul = env.size();
      if (env.compare(pos, nul - pos, entry) == 0) {
        found = true;
        break;
      }
      pos = nul + 1;
    }
    if (found && process_alive(static_cast<pid_t>(pid))) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

inline std::string pids_to_string(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) {
    std::string cmd = proc_cmdline(p);
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    s += std::to_string(p) + " [" + cmd + "] ";
  }
  return s;
}

/// SIGKILLs every process marked with `entry` until none is left or the
/// deadline passed (forks during the sweep are caught by the next round).
inline bool kill_marked(const std::string& entry, std::chrono::milliseconds timeout = 5000ms) {
  return wait_until(
      [&] {
        auto pids = pids_with_env(entry);
        for (pid_t p : pids) ::kill(p, SIGKILL);
        return pids.empty();
      },
      timeout, 10ms);
}

/// Kills what earlier test processes left behind when they crashed before
/// their TearDown: processes marked "sbxut-<pid>-..." whose test process
/// <pid> is gone. Runs of other live test processes are left alone.
inline void kill_orphans_of_dead_test_runs() {
  const std::string prefix = std::string(kMarkerVar) + "=sbxut-";
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == ::getpid()) continue;
    std::string env = read_file(std::string("/proc/") + e->d_name + "/environ");
    auto at = env.find(prefix);
    if (at == std::string::npos || (at != 0 && env[at - 1] != '\0')) continue;
    long owner = std::strtol(env.c_str() + at + prefix.size(), nullptr, 10);
    if (owner > 0 && owner != ::getpid() && !process_alive(static_cast<pid_t>(owner)))
      ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
  ::closedir(d);
}

/// The entries of `dir` (hidden ones included), sorted.
inline std::set<std::string> dir_entries(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    out.insert(it->path().filename().string());
  return out;
}

inline std::vector<std::string> ids_of(const std::vector<sup::CommandStatus>& list) {
  std::vector<std::string> out;
  for (const auto& c : list) out.push_back(c.bg_id);
  return out;
}

/// Base fixture: a temp state dir, a unique marker, and cleanup by marker.
/// Most tests want a Supervisor from SetUp; those that fork first override
/// open_in_setup().
class SupervisorTest : public ::testing::Test {
 protected:
  virtual bool open_in_setup() const { return true; }

  void SetUp() override {
    static std::atomic<int> seq{0};
    static const bool swept = (kill_orphans_of_dead_test_runs(), true);
    (void)swept;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    marker_ = "sbxut-" + std::to_string(::getpid()) + "-" + std::to_string(seq++) + "-" +
              (info ? std::string(info->name()) : std::string("x"));
    for (char& c : marker_)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') c = '_';
    if (open_in_setup()) {
      auto r = open_supervisor();
      ASSERT_TRUE(r.ok()) << describe(r.error());
      sup_ = std::move(r.value());
    }
  }

  void TearDown() override {
    // The supervisor goes first (its commands keep running), so that the
    // kills below do not race with its shutdown; that race has its own test.
    sup_.reset();
    for (pid_t p : forked_) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    forked_.clear();
    EXPECT_TRUE(kill_marked(marker_entry())) << "processes of " << marker_ << " survived SIGKILL";
  }

  /// SupervisorOptions::log_max of the next open_supervisor() / reopen().
  std::uint64_t log_max_ = sup::kDefaultLogMax;

  std::string marker_entry() const { return std::string(kMarkerVar) + "=" + marker_; }
  std::vector<pid_t> marked() const { return pids_with_env(marker_entry()); }

  std::string state_dir() const { return state_.path() + "/state"; }
  std::string procs_dir() const { return state_dir() + "/procs"; }
  std::string record_dir(const std::string& id) const { return procs_dir() + "/" + id; }
  /// Spare folders in staging/ whose files are all made (the last one,
  /// exit.json.tmp, at its full reserve): the supervisor makes them on its
  /// work pool after it opens, and after each start.
  std::vector<std::string> whole_spares() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(state_dir() + "/staging", ec)) {
      if (e.path().filename().string().rfind("spare-", 0) != 0) continue;
      struct stat st {};
      const std::string exit_tmp = e.path().string() + "/exit.json.tmp";
      if (::stat(exit_tmp.c_str(), &st) == 0 && static_cast<std::size_t>(st.st_size) >= sup::kExitFileReserve)
        out.push_back(e.path().string());
    }
    return out;
  }

  sup::Result<std::unique_ptr<sup::Supervisor>> open_supervisor() const {
    sup::SupervisorOptions o;
    o.state_dir = state_dir();
    o.monitor_path = SBX_MONITOR_PATH;
    o.log_max = log_max_;
    return sup::Supervisor::open(std::move(o));
  }

  /// Replaces sup_ by a fresh Supervisor on the same state directory.
  void reopen() {
    sup_.reset();
    auto r = open_supervisor();
    ASSERT_TRUE(r.ok()) << describe(r.error());
    sup_ = std::move(r.value());
  }

  sup::StartSpec shell(const std::string& cmd, const std::string& name = "") const {
    sup::StartSpec s;
    s.shell = cmd;
    s.cwd = work_.path();
    s.env[kMarkerVar] = marker_;
    s.name = name;
    return s;
  }

  sup::StartSpec argv(std::vector<std::string> args, const std::string& name = "") const {
    sup::StartSpec s;
    s.argv = std::move(args);
    s.cwd = work_.path();
    s.env[kMarkerVar] = marker_;
    s.name = name;
    return s;
  }

  /// Marked processes other than the record's monitor (which may outlive
  /// the report of the end by a moment).
  std::vector<pid_t> marked_except_monitor(const std::string& id) const {
    auto pids = marked();
    auto mj = read_json(record_dir(id) + "/monitor.json");
    if (mj && mj->contains("monitorPid")) {
      pid_t mon = (*mj)["monitorPid"].get<pid_t>();
      std::erase(pids, mon);
    }
    return pids;
  }

  /// Waits (bounded) until a marked process runs with exactly this argv.
  bool wait_for_marked_process(const std::vector<std::string>& args,
                               std::chrono::milliseconds timeout = 5000ms) const {
    std::string cmdline;
    for (const auto& a : args) cmdline += a + '\0';
    return wait_until(
        [&] {
          for (pid_t p : marked())
            if (proc_cmdline(p) == cmdline) return true;
          return false;
        },
        timeout);
  }

  /// Waits (bounded) until `id` has ended and returns its status.
  std::optional<sup::CommandStatus> wait_ended(const std::string& id,
                                               std::chrono::milliseconds timeout = 10000ms) {
    auto st = sup_->wait(id, timeout);
    if (!st) {
      ADD_FAILURE() << "wait(" << id << "): no such command";
      return std::nullopt;
    }
    if (st->running) {
      ADD_FAILURE() << "command " << id << " still running after " << timeout.count() << " ms";
      return std::nullopt;
    }
    return st;
  }

  TempDir state_{"sbx-ut-state"};
  TempDir work_{"sbx-ut-work"};
  std::string marker_;
  std::unique_ptr<sup::Supervisor> sup_;
  std::vector<pid_t> forked_;  ///< children forked by the test, killed in TearDown
};

}  // namespace sbxtest
