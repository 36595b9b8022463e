#include "supervisor/restart_policy.hpp"

#include <algorithm>

namespace sup {

const char* restart_policy_name(RestartPolicy p) {
  switch (p) {
    case RestartPolicy::no: return "no";
    case RestartPolicy::on_failure: return "on-failure";
    case RestartPolicy::always: return "always";
  }
  return "no";
}

std::optional<RestartPolicy> parse_restart_policy(std::string_view text) {
  for (RestartPolicy p : {RestartPolicy::no, RestartPolicy::on_failure, RestartPolicy::always})
    if (text == restart_policy_name(p)) return p;
  return std::nullopt;
}

bool restart_wanted(RestartPolicy p, const RunEnd& end, std::uint64_t restarts, std::optional<std::uint64_t> max) {
  if (end.stopped || (max && restarts >= *max)) return false;
  switch (p) {
    case RestartPolicy::no: return false;
    case RestartPolicy::on_failure: return end.signalled || end.exit_code != 0;
    case RestartPolicy::always: return true;
  }
  return false;
}

std::chrono::milliseconds RestartBackoff::after_run(std::chrono::milliseconds run) {
  if (run >= kSteadyRun) next_ = first_;
  const std::chrono::milliseconds delay = next_;
  if (run < kSteadyRun) next_ = std::max(first_, std::min(next_ * 2, kMaxDelay));
  return delay;
}

}  // namespace sup
