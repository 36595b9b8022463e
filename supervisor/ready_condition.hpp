#pragma once
// When is a command ready: a TCP port accepting, a log line matching, an
// HTTP GET answering a status in a range, or the command's own word (a
// newline on its notification descriptor, readyFd). Parsed from the `ready`
// file's words or the JSON keys readyPort / readyLog / readyLogStream /
// readyHttp / readyHttpStatus / readyIntervalMs / readyFd.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "supervisor/error.hpp"

namespace sup {

struct ReadyCondition {
  enum class Kind { port, log, http, notify };
  /// Which output a log condition reads.
  enum class Stream { both, out, err };
  Kind kind = Kind::port;
  int port = 0;         ///< port, http
  std::string regex;    ///< log: RE2 syntax, searched in each line
  Stream stream = Stream::both;  ///< log: readyLogStream
  std::string path;     ///< http: starts with '/'
  int status_min = 200, status_max = 399;  ///< http: readyHttpStatus, inclusive
  int interval_ms = 0;  ///< port, http: readyIntervalMs; 0: 50 ms doubling up to 1 s
  int fd = 0;           ///< notify: readyFd, the command's descriptor (>= 3)

  nlohmann::json to_json() const;  ///< the JSON keys; defaults left out
  std::string describe() const;    ///< "port 3000", "log ^ready", "http 3000 /health 200-299", "fd 3"
  bool operator==(const ReadyCondition&) const = default;
};

inline constexpr std::size_t kMaxConditionBytes = 4095;  ///< newline included
inline constexpr int kMinIntervalMs = 10;
/// A log pattern's largest compiled program (RE2 instructions): .{1000}b
/// is 8005.
inline constexpr int kMaxLogPatternSize = 10000;
inline constexpr int kMaxReadyFd = 1023;

/// What may be given where: readyFd only in a start request (the command
/// gets the descriptor when it starts), never on the `ready` file; in a
/// file name (`ready,readyPort=N`), only readyLog and readyPort conditions.
enum class ReadyKeys { request, ready_file, file_name };

/// `port 3000`, `log REGEX`, `http 3000 /health [200|200-299]`, or a JSON
/// object with the keys. A bad port, a regex RE2 rejects, an unknown word,
/// a NUL byte or bytes that are not UTF-8 are invalid_argument with the
/// reason; more than kMaxConditionBytes (before trimming) is too_big.
Result<ReadyCondition> parse_ready_condition(std::string_view text);
/// From the JSON keys of `j` (other keys are ignored); nullopt when none is present.
Result<std::optional<ReadyCondition>> ready_condition_from_json(const nlohmann::json& j,
                                                                ReadyKeys keys = ReadyKeys::request);
/// Whether `key` is one of the condition's JSON keys.
bool is_ready_key(std::string_view key);
/// readyHttpStatus's text form: "200" or "200-299".
Result<std::pair<int, int>> parse_status_range(std::string_view s);

}  // namespace sup
