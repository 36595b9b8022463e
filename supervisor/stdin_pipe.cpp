#include "supervisor/stdin_pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "supervisor/monitor_ctl.hpp"

namespace sup {

namespace {

Error no_reader_error(const std::string& id) {
  return Error{Errc::broken_pipe, "'" + id + "' no longer reads its input (it has ended, or closed its stdin)"};
}

}  // namespace

Result<std::shared_ptr<StdinPipe>> StdinPipe::open(const std::string& record_dir, const std::string& id) {
  const std::string path = record_dir + "/" + kStdinFile;
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) {
    if (errno == ENXIO) return no_reader_error(id);
    if (errno == ENOENT) return Error{Errc::broken_pipe, "the input of '" + id + "' was closed (stdin,eof)"};
    return error_from_errno(errno, "cannot open " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISFIFO(st.st_mode))
    return Error{Errc::io_error, path + " is not a FIFO"};
  return std::make_shared<StdinPipe>(std::move(fd), id);
}

Result<std::size_t> StdinPipe::write(std::string_view data) const {
  std::lock_guard g(mu_);
  return write_locked(data);
}

Result<std::size_t> StdinPipe::write_whole(std::string_view data) const {
  std::lock_guard g(mu_);
  if (data.empty()) return std::size_t{0};
  int unread = 0;
  const int size = ::fcntl(fd_.get(), F_GETPIPE_SZ);
  if (size < 0 || ::ioctl(fd_.get(), FIONREAD, &unread) != 0)
    return error_from_errno(errno, "cannot measure the command's stdin pipe");
  // Whole pages: a page the last write began is not shared with the next.
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  // A page more where a page is begun: the write starts on a fresh one.
  const std::size_t need =
      (static_cast<std::size_t>(unread) + page - 1) / page * page + data.size() + (unread > 0 ? page : 0);
  if (need > static_cast<std::size_t>(size)) {
    std::size_t limit = 1 << 20;
    if (std::FILE* f = std::fopen("/proc/sys/fs/pipe-max-size", "re")) {
      unsigned long v = 0;
      if (std::fscanf(f, "%lu", &v) == 1) limit = v;
      std::fclose(f);
    }
    const std::string said = std::to_string(data.size()) + " bytes";
    if (data.size() > limit)
      return Error{Errc::too_big, said + " do not fit in a pipe (at most " + std::to_string(limit) +
                                      " bytes, /proc/sys/fs/pipe-max-size): write them in parts"};
    if (need > limit)
      return Error{Errc::try_again, said + " do not fit beside the " + std::to_string(unread) +
                                        " bytes '" + id_ + "' has not read yet: try again once it has"};
    if (::fcntl(fd_.get(), F_SETPIPE_SZ, static_cast<int>(need)) < 0)  // the user's pipe pages, memory
      return error_from_errno(errno, "cannot grow the pipe of the command's stdin to " + std::to_string(need) +
                                         " bytes for " + said + ": write them in parts");
  }
  return write_locked(data);
}

Result<std::size_t> StdinPipe::write_locked(std::string_view data) const {
  if (data.empty()) return std::size_t{0};
  // A write to a pipe without a reader raises SIGPIPE in the writing
  // thread: blocked here, and taken back if it came, so that any program
  // linking this library gets EPIPE and lives.
  sigset_t pipe_only, before;
  ::sigemptyset(&pipe_only);
  ::sigaddset(&pipe_only, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_only, &before);
  const ssize_t n = ::write(fd_.get(), data.data(), data.size());
  const int err = errno;
  if (n < 0 && err == EPIPE && !::sigismember(&before, SIGPIPE)) {
    const struct timespec now {};
    while (::sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (n >= 0) return static_cast<std::size_t>(n);
  if (err == EAGAIN) return std::size_t{0};
  if (err == EPIPE) return no_reader_error(id_);
  return error_from_errno(err, "cannot write to the command's stdin");
}

}  // namespace sup
