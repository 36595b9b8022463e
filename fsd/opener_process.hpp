#pragma once
// Which close of an open file is its opener's. FUSE sends a flush for every
// close(2) of a descriptor of the open file, also by a process that only
// inherited it: a child closes its copy when it execs (close-on-exec) or
// exits. For the files whose close does something (cmd: an empty request,
// or the end of one; stop: the stop; stdin,eof: the end of the input),
// only the process that opened the file closes it.
#include <sys/types.h>

namespace fsd {

class OpenerProcess {
 public:
  /// `tid`: the open's requester, as FUSE gives it (a thread's id).
  explicit OpenerProcess(pid_t tid) : tid_(tid) {}

  /// Whether thread `tid` (a flush's requester) is of the opener's process.
  /// True when /proc cannot tell (the opener's thread is gone, or either is
  /// outside the daemon's pid namespace): the close counts, as any did.
  bool includes(pid_t tid) const;

 private:
  pid_t tid_;
};

}  // namespace fsd
