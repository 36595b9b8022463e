// sbxfs-monitor: small libc helpers (no iostream, no allocation-heavy code).
#include "monitor.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace sbxmon {

namespace {

// The kernel's struct sigaction for rt_sigaction(2) (x86_64, arm64).
struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)();
  std::uint64_t mask;
};

}  // namespace

void diag(const char* fmt, ...) {
  int saved = errno;
  char buf[1024];
  int off = snprintf(buf, sizeof buf, "sbxfs-monitor[%d]: ", static_cast<int>(::getpid()));
  if (off < 0) off = 0;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + off, sizeof buf - static_cast<size_t>(off) - 1, fmt, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(off);
  if (n > 0) len += static_cast<size_t>(n);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  (void)write_all(2, buf, len);
  errno = saved;
}

void reset_ignored_signals() {
  struct sigaction dfl;
  ::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  for (int s = 1; s < NSIG; ++s) {
    struct sigaction old;
    // The C library's reserved signals answer EINVAL: not ours to change.
    if (s != SIGKILL && s != SIGSTOP && ::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN)
      ::sigaction(s, &dfl, nullptr);
  }
  // Those (glibc's 32 and 33, below SIGRTMIN) are asked of the kernel:
  // glibc's posix_spawn ignores them in the child (the daemon starts the
  // server so), and ignored survives each exec down to every command.
  for (int s = 32; s < SIGRTMIN; ++s) {
    KernelSigaction now{};
    if (::syscall(SYS_rt_sigaction, s, nullptr, &now, sizeof now.mask) != 0 || now.handler != SIG_IGN) continue;
    KernelSigaction def{};
    def.handler = SIG_DFL;
    ::syscall(SYS_rt_sigaction, s, &def, nullptr, sizeof def.mask);
  }
}

bool parse_u64(const char* s, uint64_t* out) {
  if (s == nullptr || *s == '\0') return false;
  uint64_t v = 0;
  for (const char* p = s; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
    uint64_t d = static_cast<uint64_t>(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

}  // namespace sbxmon
