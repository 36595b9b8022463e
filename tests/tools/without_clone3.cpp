// without_clone3 PROGRAM [ARGS...]: runs PROGRAM with clone3(2) refused as
// ENOSYS, for it and every process it starts (a seccomp filter, inherited
// across fork and exec), as container runtimes' default filters long did and
// kernels before 5.3 do. The integration tests run sbxfs under it to reach
// the monitor's way without clone3: the command joins its cgroup by
// cgroup.procs (supervisor/monitor/main.cpp, fork_run).
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <cstdio>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: without_clone3 PROGRAM [ARGS...]\n");
    return 2;
  }
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  // No new privileges: what lets an unprivileged process install a filter.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    std::perror("without_clone3: seccomp");
    return 126;
  }
  ::execv(argv[1], argv + 1);
  std::perror("without_clone3: exec");
  return 127;
}
