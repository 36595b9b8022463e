#include "supervisor/cgroup_fork.hpp"

#include <linux/sched.h>  // struct clone_args, CLONE_INTO_CGROUP (glibc 2.36 has no clone3 wrapper)
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace sup {

pid_t fork_into_cgroup(int cgroup_dir) {
  struct clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;  // reaped and signalled as a fork(2) child is
  args.cgroup = static_cast<std::uint64_t>(cgroup_dir);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof args));
}

}  // namespace sup
