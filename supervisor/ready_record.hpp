#pragma once
// ready.json, a record's readiness condition and its result (FORMAT.md):
// its one writer and its one reader.
#include <optional>
#include <string>

#include "supervisor/ready_condition.hpp"
#include "supervisor/ready_match.hpp"

namespace sup {

inline constexpr const char* kReadyFile = "ready.json";

struct ReadyRecord {
  std::optional<ReadyCondition> condition;  ///< none: the request's own stays
  bool ready = false;
  std::string ready_at;                      ///< empty: not ready yet
  std::optional<ReadyMatch> matched;         ///< what made it ready
  /// The command has ended and its output was looked at for the condition
  /// once more by a daemon that took the record back: not looked at again.
  bool settled = false;
};

/// The file's text, one line.
std::string format_ready(const ReadyRecord& r);
/// nullopt when the text is no JSON object (a torn file: the record keeps
/// its request's condition, not ready); a condition that does not parse is
/// left out.
std::optional<ReadyRecord> parse_ready(const std::string& text);

}  // namespace sup
