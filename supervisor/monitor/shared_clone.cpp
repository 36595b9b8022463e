// The command's process, made without a copy of the monitor (monitor.hpp).
#include "monitor.hpp"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>

#include <cstddef>

namespace sbxmon {

namespace {

// The child runs exec_child: a few frames, exec_command's PATH_MAX buffer
// and the libc calls between. A guard page below catches an overflow.
constexpr std::size_t kStackSize = 256 * 1024;
constexpr std::size_t kGuard = 4096;

char* g_top = nullptr;  // one child at a time: made once, kept

char* child_stack_top() {
  if (g_top != nullptr) return g_top;
  void* p = ::mmap(nullptr, kStackSize + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
                   -1, 0);
  if (p == MAP_FAILED) return nullptr;
  ::mprotect(p, kGuard, PROT_NONE);
  g_top = static_cast<char*>(p) + kGuard + kStackSize;
  return g_top;
}

}  // namespace

void prepare_child_stack() { (void)child_stack_top(); }

void release_child_stack() {
  if (g_top != nullptr) ::madvise(g_top - kStackSize, kStackSize, MADV_DONTNEED);
}

pid_t clone_sharing_memory(int (*fn)(void*), void* arg) {
  char* top = child_stack_top();
  if (top == nullptr) return -1;
  // No CLONE_FILES and no CLONE_SIGHAND: the child's descriptors and signal
  // dispositions are its own copies, as after fork(2).
  return ::clone(fn, top, CLONE_VM | SIGCHLD, arg);
}

}  // namespace sbxmon
