#pragma once
// What made a command ready: the `matched` object of a ready answer, and
// when it happened (readyAt). A log match carries its line, the part that
// matched and the cursor of the event that holds the line's end
// (procs/ID/events, `since=` continues after it); its time is the output's
// own (the log index's chunk time), so it is the same after a restart.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "supervisor/ready_condition.hpp"

namespace sup {

struct ReadyMatch {
  ReadyCondition::Kind kind = ReadyCondition::Kind::port;
  std::string stream;  ///< log: "stdout" or "stderr"
  std::string text;    ///< log: the line, without its newline (cut at kMaxMatchText)
  std::string match;   ///< log: the part of it the pattern matched
  std::string cursor;  ///< log: the event's cursor; empty for a log without an index
  int port = 0;        ///< port, http
  std::string path;    ///< http
  int status = 0;      ///< http: the status it answered
  std::int64_t time_us = 0;  ///< when (microseconds since the epoch, CLOCK_REALTIME)

  /// {"kind": "log", "stream", "text", "match", "cursor"} / {"kind": "port", "port"} /
  /// {"kind": "http", "port", "path", "status"} / {"kind": "notify"}.
  nlohmann::json to_json() const;
  /// From to_json()'s object (ready.json); nullopt when it is not one. The time is not in it.
  static std::optional<ReadyMatch> from_json(const nlohmann::json& j);
};

inline constexpr std::size_t kMaxMatchText = 4096;

}  // namespace sup
