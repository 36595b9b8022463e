#pragma once
// A value snapshot of one command's record, as status.json shows it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/types.h>

#include "supervisor/ready_match.hpp"
#include "supervisor/error.hpp"

namespace sup {

struct CommandStatus {
  std::string bg_id;
  std::uint64_t serial = 0;   ///< never reused within this process; stable per bgId
  std::string state;          ///< "empty" (named slot), "queued", "running", "paused" (frozen), "restarting", "exited", "error"
  bool running = false;
  std::string note;
  std::string cmd;            ///< first 120 chars, secrets masked
  std::string cmd_full;       ///< the whole command, secrets masked
  std::vector<std::string> argv;  ///< secrets masked
  std::string cwd;             ///< secrets masked
  std::string work_dir;        ///< the cwd as it is (what is measured), never shown
  pid_t pid = 0;
  std::string started_at;     ///< ISO-8601 UTC, ms; empty when not started
  std::string finished_at;    ///< empty while running
  std::optional<int> exit_code;
  std::string signal;         ///< "SIGTERM" when a signal ended the root
  std::string end_reason;     ///< exited stopped timedOut oomKilled killed unknown
  bool timed_out = false;
  std::string end_note;       ///< endReason "unknown": what happened, in words
  std::uint64_t output_lost = 0;  ///< log bytes lost (the disk was full)
  bool truncated = false;       ///< output past log_max was dropped
  std::uint64_t dropped_bytes = 0;  ///< how much (so far, while running)
  double cpu = 0;             ///< recent %CPU of the whole tree (100 = one core)
  std::optional<Error> error; ///< state "error": why
  uid_t owner_uid = 0;        ///< who started it
  pid_t owner_sid = 0;        ///< the starter's session id
  std::string client;         ///< the starter's SBX_CLIENT; empty: none
  bool named = false;         ///< made by name (mkdir or "name"), may be restarted
  std::string log_file, stdout_file, stderr_file;  ///< paths in the state directory
  std::string ready_when;       ///< the condition, "port 3000" etc. (readyWhen); empty: none
  bool ready = false;
  std::string ready_at;
  std::optional<ReadyCondition> ready_cond;  ///< the record's condition (readyWhen)
  std::optional<ReadyMatch> ready_match;     ///< what made the record ready
  std::string tracking;         ///< "cgroup" or "proctree" (empty: never started)
  std::string cgroup;           ///< the command's cgroup, when tracking is "cgroup"
  // Supervision options.
  std::string restart;          ///< the restart policy, "no" / "on-failure" / "always" (empty: an empty slot)
  std::uint64_t restarts = 0;   ///< runs started by the policy after the first
  std::string restart_at;       ///< state "restarting": when the next run starts
  bool queued = false;          ///< state "queued": accepted, waiting for a place under max_running
  std::uint64_t queue_seq = 0;  ///< queued: its place in the queue (smaller starts first)
  /// Names the monitor that writes the log (its start time): a restart keeps
  /// it, a named slot's new run changes it; 0 before the first run.
  std::uint64_t log_owner = 0;

  /// Nothing more will happen to it: not running, not queued (ended, or an empty slot).
  bool over() const { return !running && !queued; }

  /// status.json's fields as sbxfs.5 lists them (no logPath/mine: the view adds those).
  nlohmann::json to_json() const;
};

}  // namespace sup
