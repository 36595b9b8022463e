#pragma once
// A request's `limits` (memoryMax, cpuMax, pidsMax) on its command's cgroup:
// memory.max, cpu.max and pids.max, each needing its controller enabled in
// the supervisor's subtree.
#include <optional>
#include <string>

#include "supervisor/cgroup.hpp"
#include "supervisor/error.hpp"
#include "supervisor/spec.hpp"

namespace sup {

/// Why `l` cannot be applied: no cgroup tracking (`h` null; `no_cgroup`
/// says why), or a controller it needs is not enabled (named). nullopt: it can.
std::optional<std::string> limits_refused(const Limits& l, const CgroupHierarchy* h, const std::string& no_cgroup);
/// Writes the limits into `cg` (made, still empty).
Status apply_limits(const Cgroup& cg, const Limits& l);

}  // namespace sup
