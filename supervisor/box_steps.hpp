#pragma once
// The box's steps: what was done through the tree (start, stop, signal,
// ready, mkdir, rmdir, refused starts), kept in the state directory for a
// while (7 days by default) so that they survive restarts. Root status.json
// shows the last 30, steps.json all of them.
//
// On disk (FORMAT.md, "steps/"): one JSON-lines file per UTC day,
// steps/YYYY-MM-DD.jsonl, appended to with O_APPEND. A line is a step
// {"id": N, "at": T, "kind": K, ...} or a later completion of one
// {"id": N, "done": {...fields}} (a start learns its exit code when its
// command ends, or its error when it never ran). Pruning removes whole day
// files once everything in them is older than the keep time, and readers
// skip older steps, so nothing is ever rewritten. A torn last line (a crash mid-write) is skipped.
//
// Thread-safe; add() and complete() cost one write(2) each.
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/error.hpp"
#include "supervisor/unique_fd.hpp"

namespace sup {

struct BoxStep {
  std::uint64_t id = 0;           ///< set by add()
  std::string at;                 ///< ISO-8601 UTC; set by add() when empty
  std::string kind;               ///< start, stop, signal, ready, mkdir, rmdir
  std::string summary;            ///< masked by the caller; add() drops its last newlines and cuts it to 200 characters
  std::string note, bg_id, cwd, client;
  std::optional<double> ms;       ///< how long the step took
  std::optional<bool> ok;
  std::optional<int> exit_code;
  std::string signal;             ///< "SIGTERM" when a signal ended the command
  std::optional<bool> timed_out;
  /// A refused step: the errno's name (EINVAL...) and why, in words.
  struct Refusal {
    std::string code, message;
  };
  std::optional<Refusal> error;

  nlohmann::json to_json() const;
};

class BoxSteps {
 public:
  static constexpr std::size_t kShown = 30;
  static constexpr std::size_t kSummaryChars = 200;

  /// Opens (creating) DIR and loads the latest steps. `keep`: how long a
  /// step is kept (0: forever).
  static Result<std::unique_ptr<BoxSteps>> open(std::string dir, std::chrono::seconds keep);
  /// Use open().
  BoxSteps(std::string dir, std::chrono::seconds keep) : dir_(std::move(dir)), keep_(keep) {}

  /// Records a step: gives it an id and a time, cuts its summary and note,
  /// appends it. With `open_until_end`, complete_ended(bg_id) fills it in later.
  std::uint64_t add(BoxStep s, bool open_until_end = false);
  /// The command `bg_id` ended: its open steps get ms (from their time to
  /// `ended_at_ms`, ms since the epoch), ok, exitCode, signal and timedOut.
  void complete_ended(const std::string& bg_id, std::optional<int> exit_code, const std::string& signal,
                      bool timed_out, std::int64_t ended_at_ms);

  /// The command `bg_id` never ran after all (its start failed once the
  /// step was written): its open steps get ok false and `why` as error.
  void fail_open(const std::string& bg_id, const BoxStep::Refusal& why);

  /// The bgIds with steps waiting for their command's end (after open():
  /// those of the last two days), for a caller that knows which have ended.
  std::vector<std::string> open_ids() const;
  /// Whether `bg_id` has steps waiting for its end (most commands have
  /// none: the caller looks here before it fetches the command's status).
  bool has_open(const std::string& bg_id) const;
  /// Forgets the open steps of `bg_id` (its record is gone, or a new run of
  /// the slot begins): they stay as they are.
  void drop_open(const std::string& bg_id);

  /// The last kShown steps, oldest first.
  nlohmann::json latest() const;
  /// Every kept step, oldest first: the text of a JSON array, as dump(2)
  /// writes it (read from the files).
  std::string all() const;

  /// `text` cut to at most `max` characters (UTF-8 code points), ending in "…" when cut.
  static std::string cut(std::string_view text, std::size_t max = kSummaryChars);

 private:
  struct OpenStep {
    std::uint64_t id;
    std::int64_t at_ms;  ///< the step's time, ms since the epoch
    std::string kind;
  };
  /// Appends `line` to today's file (opening it, and pruning, at a new day). Holds mu_.
  void append(const nlohmann::json& line);
  /// Removes day files whose every step is older than keep_. Holds mu_.
  void prune_days();
  /// Every kept step of `files` (in order), completions applied, oldest
  /// first; `last_id`, when given, the highest id of any step there, kept
  /// or expired.
  std::vector<BoxStep> read_days(const std::vector<std::string>& files, std::uint64_t* last_id = nullptr) const;
  std::vector<std::string> day_files() const;
  bool expired(const std::string& at) const;

  const std::string dir_;
  const std::chrono::seconds keep_;
  mutable std::mutex mu_;
  std::uint64_t next_id_ = 1;                  // guarded by mu_
  std::deque<BoxStep> latest_;                 // guarded by mu_: the last kShown
  /// Steps waiting for their command's end, by bgId, with their time (ms since epoch).
  std::unordered_map<std::string, std::vector<OpenStep>> open_;  // guarded by mu_
  std::string day_;                            // guarded by mu_: the day of fd_
  UniqueFd fd_;                                // guarded by mu_
};

}  // namespace sup
