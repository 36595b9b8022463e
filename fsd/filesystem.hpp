#pragma once
// The state every handler shares: the supervisor, the configuration, the
// error log and the parked requests; and the mapping from inodes to
// commands. Holds no pointers into the supervisor: records are value
// snapshots fetched again on every call.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <fuse_lowlevel.h>
#include <nlohmann/json.hpp>

#include "fsd/ended_lines.hpp"
#include "fsd/cache_invalidator.hpp"
#include "fsd/ended_output_cache.hpp"
#include "fsd/listing_cache.hpp"
#include "fsd/error_log.hpp"
#include "fsd/file_params.hpp"
#include "fsd/follow_requests.hpp"
#include "fsd/inode.hpp"
#include "fsd/open_handles.hpp"
#include "fsd/param_nodes.hpp"
#include "fsd/parked_requests.hpp"
#include "fsd/refused_step_budget.hpp"
#include "fsd/scratch_files.hpp"
#include "fsd/stamped_lengths.hpp"
#include "fsd/start_requests.hpp"
#include "supervisor/box_report.hpp"
#include "supervisor/box_steps.hpp"
#include "supervisor/step_store.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

struct Config {
  std::string mountpoint;                       ///< absolute
  std::chrono::seconds wait_timeout{600};       ///< cap of a blocking read of `wait`
  std::size_t max_request = std::size_t{4} << 20;  ///< bytes of one request to `cmd`
  bool allow_other = false;                     ///< users see and run only their own commands
  std::size_t output_max = std::size_t{1} << 20;  ///< bytes of each stream in procs/ID/output
  std::chrono::milliseconds scratch_ttl{60000};  ///< an unrenamed scratch file lives this long after its last close
  std::uint64_t log_max = 0;                    ///< the supervisor's log_max (0: no limit)
  std::chrono::seconds keep_steps{604800};      ///< the box's steps are kept this long; 0: forever

  /// The bounds of file-name parameters these options set.
  ParamLimits param_limits() const {
    return ParamLimits{static_cast<std::int64_t>(wait_timeout.count()), static_cast<std::int64_t>(log_max)};
  }
};

/// Who sent a request (fuse_req_ctx) and that process's session id.
struct Requester {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t sid = 0;  ///< session_key(pid): 0 when the process is gone
  /// Its SBX_CLIENT (a label for `mine`, never a credential); empty: none,
  /// or not loaded: of() leaves it empty, load_client() reads it.
  std::string client;

  static Requester of(fuse_req_t req);
  /// Reads `client` from /proc/PID/environ: once per request written or
  /// listing opened, never per read.
  void load_client();
  /// The process's working directory (/proc/PID/cwd); "/" when unknown.
  std::string cwd() const;
  /// The process's supplementary groups, all of them (/proc/PID/status,
  /// as libfuse reads them, without its cap); empty when unknown.
  std::vector<gid_t> groups() const;
};

/// An inode mapped back: which file, and for a command's files a snapshot of
/// its record; for a name with parameters (`wait,timeoutSec=5`), those.
struct Node {
  Kind kind;
  fuse_ino_t ino = 0;
  std::optional<sup::CommandStatus> record;
  std::shared_ptr<const FileParams> params = nullptr;  ///< null: the plain name

  const FileParams& keys() const {
    static const FileParams none;
    return params ? *params : none;
  }

  const std::string& id() const { return record->bg_id; }
};

/// Dumps JSON for a file of the tree: invalid UTF-8 (logs) replaced, "\n" at the end.
std::string dump_json(const nlohmann::json& j, int indent = 2);

class Filesystem {
 public:
  Filesystem(sup::Supervisor& sup, Config cfg);
  Filesystem(const Filesystem&) = delete;
  Filesystem& operator=(const Filesystem&) = delete;

  sup::Supervisor& sup() { return sup_; }
  const Config& config() const { return cfg_; }
  ErrorLog& errors() { return errors_; }
  ParkedRequests& parked() { return parked_; }
  FollowRequests& follows() { return follows_; }
  StartRequests& starts() { return starts_; }
  OpenHandles& handles() { return handles_; }
  const std::string& readme() const { return readme_; }
  sup::BoxSteps& box_steps() { return *box_steps_; }
  sup::WorkDirSizes& work_dir_sizes() { return work_dir_sizes_; }
  /// The mount point, which the daemon never looks into (own_mount.hpp).
  const sup::OwnMount& own_mount() const { return own_mount_; }
  sup::StepStore& steps() { return steps_; }
  ScratchFiles& scratch() { return scratch_; }
  ParamNodes& param_nodes() { return param_nodes_; }
  CacheInvalidator& invalidator() { return invalidator_; }
  EndedOutputCache& ended_output() { return ended_output_; }
  /// The kernel's copies of the procs/ and logs/ listings; null where
  /// readers see different listings (allow_other).
  ListingCache* listings() { return cfg_.allow_other ? nullptr : &listings_; }
  EndedLines& ended_lines() { return ended_lines_; }
  /// When a record was last made, run again or removed (procs/ and logs/
  /// date from it, as a folder does from its last change); 0: not since the mount.
  std::int64_t records_changed_ns() const { return records_changed_ns_.load(std::memory_order_relaxed); }
  StampedLengths& stamped_lengths() { return stamped_lengths_; }

  /// Adds an action done through the tree to the box's steps (root
  /// status.json `steps`, steps.json): `summary` and the note masked, cwd,
  /// note and client from `st` (the record as it was; null: looked up by
  /// `id`). A start or a stop is completed when its command ends (ms, ok,
  /// exitCode, signal, timedOut).
  void note_action(std::string kind, const std::string& summary, const std::string& id,
                   const sup::CommandStatus* st = nullptr);
  /// A start refused with `code` for `reason`; `request` masked by the
  /// caller, the writer's cwd here with `secrets` (the request's own among
  /// them). `slot`: the named slot it was written to (procs/NAME/cmd), else empty.
  void note_refused_start(const std::string& request, sup::Errc code, const std::string& reason,
                          const Requester& who, const std::vector<std::string>& secrets,
                          const std::string& slot = {});

  /// The start of `id`, whose step was written before its command was let
  /// go, failed after all (`reason` as errors shows it): the step says so.
  void note_start_failed(const std::string& id, sup::Errc code, const std::string& reason);

  /// The node of `ino`; ENOENT when it names nothing (any more) or nothing `who` may see.
  sup::Result<Node> resolve(fuse_ino_t ino, const Requester& who);
  /// A node for record `st` (remembers its serial for resolve()).
  Node node_of(const sup::CommandStatus& st, Kind kind);
  /// The record `id` when it exists and `who` may see it; `cpu` is 0 (not
  /// sampled: lookups and attributes need none).
  std::optional<sup::CommandStatus> find(const std::string& id, const Requester& who) const;
  /// With allow_other a user sees only their own commands (root: all).
  bool visible(const sup::CommandStatus& st, const Requester& who) const { return visible(st.owner_uid, who); }
  bool visible(uid_t owner_uid, const Requester& who) const { return sees_all(who) || who.uid == owner_uid; }
  /// `who` sees every record: no allow_other, or root.
  bool sees_all(const Requester& who) const { return !cfg_.allow_other || who.uid == 0; }

  /// `mine` of status.json: the same SBX_CLIENT when both have one, else
  /// the same session (and uid under allow_other); see sbxfs.5. `reader`
  /// must have its client loaded.
  bool mine(const sup::CommandStatus& st, const Requester& reader) const;
  /// One command's status.json: the record plus logPath and mine, strings masked.
  nlohmann::json record_json(const sup::CommandStatus& st, const Requester& reader) const;
  /// The last `bytes` bytes of the command's log, secrets masked.
  std::string log_tail(const sup::CommandStatus& st, std::size_t bytes = kDefaultTailBytes) const;
  static constexpr std::size_t kDefaultTailBytes = 4096;
  std::string mask(std::string_view text, const std::string& id) const { return sup_.mask(text, id); }
  /// Masks every string in `j` with the secrets of record `id` (empty: the
  /// global ones) but a record's names, top-level bgId and logPath: what
  /// `ls procs` shows as it is, and masked they would name no record.
  void mask_json(nlohmann::json& j, const std::string& id, bool top = true) const;

  /// Stops listening to the supervisor, answers every parked request (starts
  /// under way fail), then frees the files left open; called once the FUSE
  /// loop has ended, before the supervisor goes away.
  void shutdown() {
    invalidator_.stop();
    sup_.unsubscribe(ended_subscription_);
    sup_.cancel_starts();
    parked_.shutdown();
    follows_.shutdown();
    stamped_lengths_.clear();
    handles_.clear();
  }


 private:
  /// The box's steps of command `id` learn its end, if it has ended.
  void complete_steps(const std::string& id);
  void remember(const sup::CommandStatus& st);
  /// The record `id` of `serial` was removed: what is held for it goes.
  void forget(const std::string& id, std::uint64_t serial);
  sup::Result<Node> resolve_record(fuse_ino_t ino, Kind kind, std::uint64_t serial, const Requester& who);
  /// resolve() of a name with parameters (an inode of param_nodes_).
  sup::Result<Node> resolve_param(fuse_ino_t ino, const Requester& who);

  sup::Supervisor& sup_;
  const Config cfg_;
  const std::string readme_;
  ErrorLog errors_;
  OpenHandles handles_;  // before parked_: parked requests may point into handles
  ParkedRequests parked_;
  FollowRequests follows_;  // after handles_, like parked_
  StartRequests starts_;
  std::unique_ptr<sup::BoxSteps> box_steps_;
  RefusedStepBudget refused_budget_;  // how many refused requests of each user box_steps_ keeps
  std::uint64_t ended_subscription_ = 0;
  sup::WorkDirSizes work_dir_sizes_;
  const sup::OwnMount own_mount_{cfg_.mountpoint};
  sup::StepStore steps_;
  ScratchFiles scratch_;  // after errors_, which it writes to
  ParamNodes param_nodes_;
  EndedLines ended_lines_;
  CacheInvalidator invalidator_{std::chrono::seconds(1)};
  EndedOutputCache ended_output_{sup_, invalidator_};  // after invalidator_, which it uses
  ListingCache listings_;
  StampedLengths stamped_lengths_;  // after follows_, which its handles use

  std::atomic<std::int64_t> records_changed_ns_{0};

  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::string> id_of_serial_;  // guarded by mu_
};

}  // namespace fsd
