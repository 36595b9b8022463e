#pragma once
// Which close of an open file counts. FUSE sends a flush for every close(2)
// of a descriptor of the open file, also by a process that only inherited
// it: a child closes its copy when it execs (close-on-exec) or exits. For
// the files whose close does something (cmd: an empty request, or the end
// of one; stop: the stop; stdin,eof: the end of the input), the close of
// the process that opened the file counts, and for cmd also that of a
// process that wrote through it: sh (dash) opens `cat req > cmd`'s file
// itself and lets the child it starts write, and the child is the one that
// should hear, at its close, that the request was refused.
#include <sys/types.h>

#include <array>
#include <cstddef>

namespace fsd {

/// The process (thread group) of thread `tid`, from /proc/TID/status; 0
/// when unknown.
pid_t process_of_thread(pid_t tid);

class OpenerProcess {
 public:
  /// `tid`: the open's requester, as FUSE gives it (a thread's id).
  explicit OpenerProcess(pid_t tid) : tids_{tid} {}

  /// Thread `tid` wrote through the file: its process's close counts too
  /// (the first few such processes).
  void wrote(pid_t tid);

  /// Whether thread `tid` (a flush's requester) is of the opener's process
  /// (or of a living writer's). True when /proc cannot tell (the opener's
  /// thread gone, or the closer outside the daemon's pid namespace): the
  /// close counts, as any did.
  bool includes(pid_t tid) const;

 private:
  std::array<pid_t, 4> tids_;  // the opener's, then writers'; 0: none
};

}  // namespace fsd
