#pragma once
// When is a command ready: a TCP port accepting, a log line matching, or an
// HTTP GET answering 2xx/3xx. Parsed from the `ready` file's words or the
// JSON keys readyPort / readyLog / readyHttp.
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "supervisor/error.hpp"

namespace sup {

struct ReadyCondition {
  enum class Kind { port, log, http };
  Kind kind = Kind::port;
  int port = 0;         ///< port, http
  std::string regex;    ///< log: RE2 syntax, searched in each line
  std::string path;     ///< http: starts with '/'

  nlohmann::json to_json() const;  ///< {"readyPort": ..} / {"readyLog": ..} / {"readyHttp": .., "readyPort": ..}
  std::string describe() const;    ///< "port 3000", "log ^ready", "http 3000 /health"
};

inline constexpr std::size_t kMaxConditionBytes = 4095;  ///< newline included

/// `port 3000`, `log REGEX`, `http 3000 /health`, or a JSON object with
/// readyPort / readyLog / readyHttp. A bad port, a regex RE2 rejects, an
/// unknown word, a NUL byte or bytes that are not UTF-8 are invalid_argument
/// with the reason; more than kMaxConditionBytes (before trimming) is too_big.
Result<ReadyCondition> parse_ready_condition(std::string_view text);
/// From the JSON keys; nullopt when none is present.
Result<std::optional<ReadyCondition>> ready_condition_from_json(const nlohmann::json& j);

}  // namespace sup
