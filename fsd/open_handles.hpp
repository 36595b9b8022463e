#pragma once
// The open files of the tree. fi->fh is a handle's address; this table owns
// the handles, so those the kernel never released (the mount went away while
// they were open: no RELEASE follows) are freed with the filesystem instead
// of leaking.
//
// A handler holds its handle through use() for as long as it runs: a parked
// request may be answered by another thread while the handler is still
// returning, and the kernel may then close the file and send RELEASE at once.
// The handle is freed when the last of release and the handlers lets go.
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fsd/handle.hpp"

namespace fsd {

class OpenHandles {
 public:
  /// Keeps `h`, open on inode `ino` by user `uid` (thread `tid`, as FUSE
  /// names the opener); the return value is the fh to give the kernel.
  std::uint64_t keep(std::unique_ptr<Handle> h, std::uint64_t ino, uid_t uid, pid_t tid = 0);
  /// The handle behind `fh`, held by the caller until it lets go; null once
  /// released (the kernel never sends that, but a bad fh must not crash us).
  std::shared_ptr<Handle> use(std::uint64_t fh);
  /// A handle open on `ino` by user `uid` (root: by anyone), held as by
  /// use(); null when none is. The kernel asks fstat(2) of a file by its
  /// inode alone: of a removed record's file, open still, an open handle
  /// is all that can answer.
  std::shared_ptr<Handle> any_on(std::uint64_t ino, uid_t uid);
  /// A handle open on `ino` by the process of thread `tid`, held as by
  /// use(); null when it has none (or /proc cannot tell). fstat(2) is asked
  /// by the inode alone, and a log past log_max is not the same file to
  /// every reader: a reader that kept up (tail -f) has read further than a
  /// new one would find, and must be told its own file's size.
  std::shared_ptr<Handle> opened_by(std::uint64_t ino, pid_t tid);
  /// Forgets a released handle (or one whose open could not be answered);
  /// it is freed once no handler holds it.
  void drop(std::uint64_t fh);
  /// Frees every handle left; once the FUSE loop has ended.
  void clear();

 private:
  std::mutex mu_;
  struct Open {
    std::shared_ptr<Handle> handle;
    std::uint64_t ino;
    uid_t uid;
    pid_t tid;      // the opener's thread
    pid_t process;  // its process, once asked for (opened_by); 0: not yet
  };
  std::unordered_map<std::uint64_t, Open> open_;                // by fh; guarded by mu_
  std::unordered_multimap<std::uint64_t, std::uint64_t> fhs_;  // ino -> fh; guarded by mu_
};

}  // namespace fsd
