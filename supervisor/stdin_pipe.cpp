#include "supervisor/stdin_pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

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
