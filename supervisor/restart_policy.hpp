#pragma once
// A command's restart policy (the request's `restart`, `restartDelaySec`,
// `maxRestarts`), run by its monitor so that it goes on while no daemon
// runs: which ends of a run start another, and the delays between runs.
//
// libc and the standard library only: sbxfs-monitor links it.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sup {

enum class RestartPolicy : std::uint8_t {
  no,          ///< never (the default)
  on_failure,  ///< after a non-zero exit, or a signal that was not a stop (a timeout is one)
  always,      ///< after every end that was not a stop
};

/// "no", "on-failure", "always": the request's and the monitor's spelling.
const char* restart_policy_name(RestartPolicy p);
std::optional<RestartPolicy> parse_restart_policy(std::string_view text);

/// How a run ended, as far as the policy cares.
struct RunEnd {
  int exit_code = 0;     ///< the root's exit status (meaningless when signalled)
  bool signalled = false;  ///< a signal ended the root (a timeout's too)
  bool stopped = false;    ///< a stop (`stop`, a `term`/`kill` request, the monitor's SIGTERM) ended it
};

/// Whether `end` starts another run under `p`; `restarts` so far against `max`.
bool restart_wanted(RestartPolicy p, const RunEnd& end, std::uint64_t restarts,
                    std::optional<std::uint64_t> max);

/// The delays between runs: `first`, doubled after each run shorter than
/// kSteadyRun up to kMaxDelay (or `first`, when that is longer); a run that
/// lasted kSteadyRun or more starts the sequence again.
class RestartBackoff {
 public:
  static constexpr std::chrono::milliseconds kSteadyRun{10000};
  static constexpr std::chrono::milliseconds kMaxDelay{60000};

  explicit RestartBackoff(std::chrono::milliseconds first) : first_(first), next_(first) {}
  /// The delay before the run that follows one which lasted `run`.
  std::chrono::milliseconds after_run(std::chrono::milliseconds run);

 private:
  std::chrono::milliseconds first_, next_;
};

}  // namespace sup
