#include "supervisor/cgroup_limits.hpp"

#include <algorithm>
#include <cmath>

namespace sup {

namespace {
constexpr std::uint64_t kCpuPeriodUsec = 100000;
}  // namespace

std::optional<std::string> limits_refused(const Limits& l, const CgroupHierarchy* h, const std::string& no_cgroup) {
  if (!l.memory_max && !l.cpu_max && !l.pids_max) return std::nullopt;
  if (!h) return "'limits' need a command's own cgroup, and this daemon has none: " + no_cgroup;
  const std::pair<bool, const char*> needs[] = {
      {l.memory_max.has_value(), "memory"}, {l.cpu_max.has_value(), "cpu"}, {l.pids_max.has_value(), "pids"}};
  const char* keys[] = {"memoryMax", "cpuMax", "pidsMax"};
  for (std::size_t i = 0; i < 3; ++i) {
    if (needs[i].first && !h->has(needs[i].second))
      return std::string("'limits.") + keys[i] + "' needs the " + needs[i].second +
             " controller, which is not enabled in the cgroup v2 hierarchy at " + h->base +
             " (cgroup.subtree_control of " + h->subtree + ")";
  }
  return std::nullopt;
}

Status apply_limits(const Cgroup& cg, const Limits& l) {
  auto put = [&](const char* file, const std::string& value) -> Status {
    if (int e = cg.set(file, value)) return error_from_errno(e, std::string("cannot set ") + file + " to " + value);
    return Ok{};
  };
  if (l.memory_max)
    if (auto st = put("memory.max", std::to_string(*l.memory_max)); !st) return st;
  if (l.cpu_max) {
    // PERCENT of one core: that share of each period (the kernel's least quota is 1 ms).
    const auto quota = std::max<std::uint64_t>(1000, static_cast<std::uint64_t>(std::llround(*l.cpu_max * 1000.0)));
    if (auto st = put("cpu.max", std::to_string(quota) + " " + std::to_string(kCpuPeriodUsec)); !st) return st;
  }
  if (l.pids_max)
    if (auto st = put("pids.max", std::to_string(*l.pids_max)); !st) return st;
  return Ok{};
}

}  // namespace sup
