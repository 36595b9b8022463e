#pragma once
// A fork whose child is born inside a cgroup (clone3 with CLONE_INTO_CGROUP).
//
// A child that joins by writing cgroup.procs after fork(2) migrates, and a
// migration takes the cgroup core's lock for writing, which waits for an RCU
// grace period: 0.2–0.6 ms a start on this kind of machine, against nothing
// for a child created in place (measured: fork + join 0.47–0.89 ms, clone3
// into the cgroup 0.32–0.37 ms, plain fork 0.26 ms). It also leaves no
// moment when the child runs outside.
//
// libc only (the static monitor links it).
#include <sys/types.h>

namespace sup {

/// As fork(2), the child in the cgroup whose directory `cgroup_dir` is open
/// (O_RDONLY | O_DIRECTORY). -1 with errno when the kernel cannot (before
/// 5.7: ENOSYS; E2BIG, EINVAL) or the cgroup refuses (EBUSY, EOPNOTSUPP...):
/// the caller may then fork(2) and join by cgroup.procs, which reports the
/// cgroup's own error. The child has the restrictions of a fork in a
/// single-threaded process (no atfork handlers run): async-signal-safe
/// calls until it execs.
pid_t fork_into_cgroup(int cgroup_dir);

}  // namespace sup
