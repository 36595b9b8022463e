#include "supervisor/access_as.hpp"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace sup {

namespace {

/// This thread's file-system ids and groups, as `who`'s until destroyed.
/// The syscalls, not glibc's setgroups(): that one changes every thread.
class ThreadCredentials {
 public:
  explicit ThreadCredentials(const Credentials& who) {
    const int n = ::getgroups(0, nullptr);
    own_groups_.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    if (n > 0 && ::getgroups(n, own_groups_.data()) != n) own_groups_.clear();
    ok_ = ::syscall(SYS_setgroups, who.groups.size(), who.groups.data()) == 0;
    ::setfsgid(who.gid);
    ::setfsuid(who.uid);  // last: after it, this thread could not set the rest
    ok_ = ok_ && static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1))) == who.uid &&
          static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1))) == who.gid;
  }
  ~ThreadCredentials() {
    ::setfsuid(::geteuid());
    ::setfsgid(::getegid());
    // A thread of the daemon left with a user's groups would go on with
    // them: nothing here is worth that.
    if (::syscall(SYS_setgroups, own_groups_.size(), own_groups_.data()) != 0) std::abort();
  }
  ThreadCredentials(const ThreadCredentials&) = delete;
  ThreadCredentials& operator=(const ThreadCredentials&) = delete;
  bool ok() const { return ok_; }

 private:
  std::vector<gid_t> own_groups_;
  bool ok_ = false;
};

}  // namespace

Status check_searchable_as(const std::string& dir, const Credentials& who) {
  if (::geteuid() != 0 || who.uid == 0) return Ok{};
  int err = 0;
  {
    ThreadCredentials as(who);
    if (!as.ok()) return Ok{};  // cannot tell here; the command's own chdir still can fail
    // AT_EACCESS: the check uses this thread's file-system ids, not the real ones.
    if (::faccessat(AT_FDCWD, dir.c_str(), X_OK, AT_EACCESS) != 0) err = errno;
  }
  if (err == 0) return Ok{};
  return error_from_errno(err, "cwd '" + dir + "' cannot be searched by uid " + std::to_string(who.uid));
}

}  // namespace sup
