// sbxfs-monitor: the "signal the whole tree" sweep.
//
// The monitor is a child subreaper, so every process started below it stays
// below it (orphans are re-parented to the monitor, setsid() does not change
// the parent). "Every descendant" is therefore the set of processes whose
// parent chain reaches the monitor, found in /proc (supervisor/proc_tree.hpp).
// Processes forked during a sweep are caught by the group signal or by the
// next sweep (the SIGKILL sweep repeats).
#include "monitor.hpp"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include <vector>

#include "supervisor/proc_tree.hpp"

namespace sbxmon {

size_t signal_tree(pid_t group, bool group_usable, int sig, bool also_cont) {
  pid_t self = ::getpid();
  bool group_signalled = false;
  auto signal_group = [&] {
    if (group <= 1 || group_signalled) return;
    ::kill(-group, sig);
    if (also_cont) ::kill(-group, SIGCONT);
    group_signalled = true;
  };
  // While the leader is not reaped its pid cannot be recycled, so the group
  // is safe to signal. Signal it first: that is atomic for its members.
  if (group_usable) signal_group();

  const std::vector<sup::ProcEntry> desc = sup::descendants_in(sup::scan_processes(), self);
  for (const sup::ProcEntry& e : desc) {
    // A member had the group's signal: one write is one signal (a program
    // that counts its SIGUSR1s, or takes a second TERM for "at once").
    if (group_signalled && e.stat.pgrp == group) continue;
    // Pin the process with a pidfd, then check it still is the one we found
    // (same parent, or re-parented to us after its parent died): a pid that
    // was recycled in between is not signalled.
    int pfd = sup::open_pidfd(e.pid);
    if (pfd < 0) {
      if (errno != ENOSYS) continue;  // gone
      ::kill(e.pid, sig);             // no pidfds: best effort
      if (also_cont) ::kill(e.pid, SIGCONT);
      continue;
    }
    sup::ProcStat st;
    if (sup::read_proc_stat(e.pid, &st) && (st.ppid == e.stat.ppid || st.ppid == self)) {
      if (group > 1 && st.pgrp == group) {
        // The leader is reaped, but a member of ours keeps the group's id
        // from being recycled: the group's signal reaches every member,
        // those outside this tree too, once.
        signal_group();
      } else {
        sup::pidfd_signal(pfd, sig);
        if (also_cont) sup::pidfd_signal(pfd, SIGCONT);
      }
    }
    ::close(pfd);
  }
  return desc.size();
}

}  // namespace sbxmon
