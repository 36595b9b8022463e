#pragma once
// The machine part of the root status.json: load, memory and disks (cheap:
// sysinfo, /proc/meminfo, statvfs), and WorkDirSizes, the one slow figure
// (how much each entry under a command's working directory takes), measured
// on its own thread and cached, so that a read never waits for it.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/own_mount.hpp"

namespace sup {

/// {"1m": x, "5m": y, "15m": z}
nlohmann::json load_json();
/// {"totalGb": x, "availableGb": y} (MemAvailable; sysinfo's free when missing)
nlohmann::json memory_json();
/// For the state directory's filesystem, /, /tmp and /dev/shm:
/// [{what, path, sizeGb, usedGb, freeGb}], or {what, path, sameAs: PATH}
/// for one on the same device as an earlier one (never counted twice);
/// one that is the daemon's own mount point, {what, path, error}, not looked at.
nlohmann::json disk_json(const std::string& state_dir, const OwnMount& own = OwnMount());

class WorkDirSizes {
 public:
  static constexpr std::chrono::seconds kFresh{30};
  static constexpr std::size_t kTopEntries = 20;
  /// A directory no report asked for this long is forgotten (the commands
  /// that ran there ended; paths of removed records would pile up).
  static constexpr std::chrono::minutes kForgetAfter{10};

  WorkDirSizes();
  /// Stops the measuring thread; one stuck in a walk (a file system below a
  /// working directory that does not answer) is left behind, not waited for.
  ~WorkDirSizes();
  WorkDirSizes(const WorkDirSizes&) = delete;
  WorkDirSizes& operator=(const WorkDirSizes&) = delete;

  /// The daemon's own mount point (absolute). A working directory in that
  /// mount, or in another mount of it, or reached through a symbolic link
  /// into one, is not measured: the walk's requests would go to the daemon
  /// itself, and one under way when the daemon is killed (SIGKILL) would
  /// wait for an answer for ever, holding the daemon and its mount.
  void keep_out(const OwnMount& own_mount);

  /// Never blocks on a measurement. For each directory: its figures when
  /// measured (a measurement older than kFresh is shown and redone), else an
  /// entry of `not_measured` with measuring: true, and a measurement queued.
  void report(const std::vector<std::string>& dirs, nlohmann::json& measured, nlohmann::json& not_measured);

 private:
  struct Result {
    nlohmann::json json;                           // the figures, with measuredAt
    std::chrono::steady_clock::time_point when{};  // when measured
    std::chrono::steady_clock::time_point asked{};  // when a report last showed it
    bool measuring = false;
  };
  /// Shared with the thread, which may outlive this object.
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, Result> results;  // guarded by mu
    std::deque<std::string> queue;          // guarded by mu
    bool stop = false;                      // guarded by mu
    bool exited = false;                    // guarded by mu: the thread has returned
    OwnMount own_mount;                     // guarded by mu: keep_out()
    std::atomic<bool> cancel{false};        // set with stop: a walk under way gives up
  };
  static void run(const std::shared_ptr<State>& s);

  std::shared_ptr<State> state_;
  std::thread worker_;
};

}  // namespace sup
