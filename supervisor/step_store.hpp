#pragma once
// The steps inside commands (procs/ID/steps, written by sbx-step): per run
// of a command, in order, with the one still going marked running. Kept in
// memory and in the record's folder of the state directory (steps.json next
// to its logs), so they outlive a restart of the daemon. Thread-safe.
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/command_status.hpp"
#include "supervisor/error.hpp"

namespace sup {

class StepStore {
 public:
  /// Where a failure to save goes (the daemon's log); may be empty.
  using Warn = std::function<void(const std::string& message)>;
  explicit StepStore(Warn warn = {}) : warn_(std::move(warn)) {}

  /// Applies the lines of one write: `start NAME` opens a step, `end
  /// [EXITCODE]` closes the latest open one, `end EXITCODE NAME` the latest
  /// open one of that name. Times are taken here, at arrival. A line that
  /// is not UTF-8 text, or not one of these, is an invalid_argument error and
  /// changes nothing; the lines before it stay applied. What changed is saved.
  sup::Status apply(const sup::CommandStatus& st, std::string_view lines);
  /// The steps of the run `st` as steps.json shows them: [{name, startedAt,
  /// ms, exitCode, running}]; a step left open by an ended command has
  /// running false and unfinished true.
  nlohmann::json to_json(const sup::CommandStatus& st);
  /// The record `bg_id` is gone: what is held of its runs goes too (a new
  /// record of the name reads its own steps.json).
  void forget(const std::string& bg_id);

 private:
  struct Step {
    std::string name;
    std::string started_at;
    std::int64_t start_ms = 0;
    std::optional<std::int64_t> ms;
    std::optional<int> exit_code;
    bool running = true;
  };
  /// The steps of one run (loaded from the state directory the first time). Holds mu_.
  std::vector<Step>& run_of(const sup::CommandStatus& st);
  /// One line (trimmed, not empty) applied to `steps`, or why not (nothing changed).
  static sup::Status apply_line(std::vector<Step>& steps, std::string_view line);
  /// Writes `steps` to the record's steps.json in the state directory.
  void save(const sup::CommandStatus& st, const std::vector<Step>& steps) const;
  static std::string file_of(const sup::CommandStatus& st);
  static nlohmann::json dump(const std::vector<Step>& steps, bool command_running);

  const Warn warn_;
  std::mutex mu_;
  std::map<std::string, std::vector<Step>> runs_;  // guarded by mu_; key: bgId + "@" + startedAt
};

}  // namespace sup
