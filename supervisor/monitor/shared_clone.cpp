// The command's process, made without a copy of the monitor (monitor.hpp).
#include "monitor.hpp"

#include <errno.h>
#include <linux/sched.h>  // struct clone_args, CLONE_INTO_CGROUP
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include <cstddef>
#include <cstdint>

// clone3(2) with a stack of the child's own has no wrapper in this C library
// (glibc 2.36): the child starts on that stack at the syscall's return, so
// the call and the jump to fn are made here, as the C library's own clone
// does. x86-64 only; elsewhere clone_sharing_memory() says ENOSYS for a
// cgroup and the caller joins it by cgroup.procs.
#if defined(__x86_64__) && defined(SYS_clone3)
#define SBX_HAVE_CLONE3_RUN 1
extern "C" long sbx_clone3_run(clone_args* args, std::size_t size, int (*fn)(void*), void* arg);
// rdi = args, rsi = size, rdx = fn, rcx = arg. The syscall keeps r8/r9 in
// both processes; the child returns 0 on its own stack (16-byte aligned,
// so the call leaves fn's frame as the ABI wants), calls fn(arg) and, should
// fn return, exits with its value.
asm(R"(
    .text
    .globl sbx_clone3_run
    .type sbx_clone3_run, @function
sbx_clone3_run:
    .cfi_startproc
    mov %rdx, %r8
    mov %rcx, %r9
    mov $435, %eax
    syscall
    test %rax, %rax
    jz 1f
    ret
1:
    .cfi_undefined %rip
    xor %ebp, %ebp
    mov %r9, %rdi
    call *%r8
    mov %eax, %edi
    mov $60, %eax
    syscall
    hlt
    .cfi_endproc
    .size sbx_clone3_run, .-sbx_clone3_run
)");
static_assert(SYS_clone3 == 435, "the trampoline's syscall number");
#endif

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

pid_t clone_sharing_memory(int (*fn)(void*), void* arg, int cgroup_dir) {
  char* top = child_stack_top();
  if (top == nullptr) return -1;
  // No CLONE_FILES and no CLONE_SIGHAND: the child's descriptors and signal
  // dispositions are its own copies, as after fork(2).
  if (cgroup_dir < 0) return ::clone(fn, top, CLONE_VM | SIGCHLD, arg);
#ifdef SBX_HAVE_CLONE3_RUN
  clone_args a{};
  a.flags = CLONE_VM | CLONE_INTO_CGROUP;
  a.exit_signal = SIGCHLD;
  a.stack = reinterpret_cast<std::uintptr_t>(top - kStackSize);
  a.stack_size = kStackSize;
  a.cgroup = static_cast<std::uint64_t>(cgroup_dir);
  const long r = sbx_clone3_run(&a, sizeof a, fn, arg);
  if (r >= 0) return static_cast<pid_t>(r);
  errno = static_cast<int>(-r);
#else
  errno = ENOSYS;
#endif
  return -1;
}

}  // namespace sbxmon
