// sbxfs-monitor: the output relay (command pipes -> log, stdout, stderr).
//
// Each chunk read from a stream's pipe goes to `log` (both streams, in the
// order read) and to the stream's own file. Plain read()+write()+write():
// tee(2)+splice(2) into the files was measured slower on this kernel (the
// in-kernel copy from pipe pages cost ~3x the copy from a user buffer;
// 1 GiB: 0.80-1.11 s of monitor CPU against 0.61-0.74 s). A 256 KiB buffer
// and a pipe grown to 1 MiB once it is found full took the most off
// (0.51-0.57 s): fewer wake-ups of the monitor and of the writer.
//
// `stdout` and `stderr` are created at their stream's first byte (many
// commands write to one stream or none, and on ext4 every file created at
// start cost 15-200 us, bench/RESULTS.md); `log` just after the start.
//
// While only one stream has written, the log holds exactly its bytes: that
// stream's file is then a second name (hard link) of `log`, and each byte
// is written once, not twice (capture of 1 GiB: the second write was about
// a third of the time). At the other stream's first byte, the linked one
// gets a file of its own first: a copy of the log so far (copy_file_range),
// renamed over the link, so its name never shows the other stream's bytes.
//
// The log keeps the first log_max bytes of output; past that, stdout and
// stderr are still drained (the command never blocks on a full pipe) and
// counted, not kept: `dropped` is created and its size (a sparse file, no
// blocks) is the count; the log and each stream file that lost bytes get
// one marker line.
#include "monitor.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace sbxmon {

namespace {

constexpr size_t kChunk = 256 * 1024;
// A pipe found full is grown to this (the default pipe-max-size). Not at
// start: pipe pages count against the user's pipe-user-pages-soft (64 MiB
// by default), past which an unprivileged user's new pipes get 2 pages.
constexpr int kBigPipe = 1 << 20;
// drain(): rounds before giving up on a writer outside the tree that never stops.
constexpr int kDrainRounds = 1024;

// Only the pages a read touched count in the monitor's memory.
char g_buf[kChunk];

}  // namespace

Relay::Relay(int dirfd, uint64_t log_max, Stream& out, Stream& err)
    : dirfd_(dirfd), log_max_(log_max), out_(out), err_(err) {}

bool Relay::open_log() {
  if (logfd_ >= 0) return true;
  // Readable too: the truncation marker looks at the last byte kept.
  logfd_ = ::openat(dirfd_, "log", O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (logfd_ < 0) note(&log_state_, "log", errno);  // tried again at the next chunk
  return logfd_ >= 0;
}

void Relay::note(int* state, const char* name, int err) {
  if (err != 0 && *state == 0) diag("writing %s failed (%s); output is dropped", name, ::strerror(err));
  if (err == 0 && *state != 0) diag("writing %s works again", name);
  *state = err;
}

void Relay::grow(Stream& s) {
  s.grown = true;  // once: a refusal (EPERM past the user's limits) is final
  int size = ::fcntl(s.pipe, F_SETPIPE_SZ, kBigPipe);
  if (size < 0) diag("%s: cannot grow the pipe: %s", s.name, ::strerror(errno));
}

void Relay::mark(int fd, int* state, const char* name) {
  // On a line of its own: a newline first unless the kept bytes end with one.
  char last = '\n';
  off_t end = ::lseek(fd, 0, SEEK_END);
  if (end > 0 && ::pread(fd, &last, 1, end - 1) != 1) last = '\n';
  char line[256];
  int len = snprintf(line, sizeof line,
                     "%s[sbxfs: log_max (%llu bytes) reached: later output is counted in droppedBytes, not kept]\n",
                     last == '\n' ? "" : "\n", static_cast<unsigned long long>(log_max_));
  if (len > 0) note(state, name, write_all(fd, line, static_cast<size_t>(len)));
}

bool Relay::open_stream_file(Stream& s) {
  if (s.file >= 0) return true;
  Stream& other = &s == &out_ ? err_ : out_;
  if (!other.seen && open_log() && ::linkat(dirfd_, "log", dirfd_, s.name, 0) == 0) {
    s.file = logfd_;
    s.linked = true;
    return true;
  }
  if (other.linked) unlink_stream(other);
  s.file = ::openat(dirfd_, s.name, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (s.file < 0) note(&s.state, s.name, errno);  // tried again at the next chunk
  return s.file >= 0;
}

void Relay::unlink_stream(Stream& s) {
  s.linked = false;
  s.file = -1;
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%s.tmp", s.name);
  int fd = ::openat(dirfd_, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int err = fd < 0 ? errno : 0;
  struct stat st {};
  if (err == 0 && ::fstat(logfd_, &st) != 0) err = errno;
  loff_t in = 0;
  while (err == 0 && in < st.st_size) {
    // O_APPEND would make copy_file_range fail (EBADF): it is set after.
    ssize_t n = ::copy_file_range(logfd_, &in, fd, nullptr, static_cast<size_t>(st.st_size - in), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) err = n < 0 ? errno : EIO;
  }
  if (err == 0 && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_APPEND) != 0) err = errno;
  if (err == 0 && ::renameat(dirfd_, tmp, dirfd_, s.name) != 0) err = errno;
  if (err == 0) {
    s.file = fd;
    return;
  }
  // Disk full, most likely: rather no file than one that mixes both streams.
  if (fd >= 0) ::close(fd);
  ::unlinkat(dirfd_, tmp, 0);
  ::unlinkat(dirfd_, s.name, 0);
  note(&s.state, s.name, err);
}

void Relay::count_dropped(Stream& s, size_t n) {
  if (dropped_ == 0 && open_log()) mark(logfd_, &log_state_, "log");
  if (!s.marked && open_stream_file(s)) {
    if (!s.linked) mark(s.file, &s.state, s.name);  // linked: the log's mark is its own
    s.marked = true;
  }
  dropped_ += n;
  if (dropped_fd_ < 0) {
    dropped_fd_ = ::openat(dirfd_, "dropped", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (dropped_fd_ < 0) diag("cannot create dropped: %s", ::strerror(errno));
  }
  if (dropped_fd_ >= 0 && ::ftruncate(dropped_fd_, static_cast<off_t>(dropped_)) != 0)
    diag("cannot update dropped: %s", ::strerror(errno));
}

Relay::Result Relay::pump(Stream& s) {
  if (s.pipe < 0) return Result::closed;
  const ssize_t n = ::read(s.pipe, g_buf, kChunk);
  if (n < 0 && errno == EINTR) return Result::moved;  // nothing lost: try again
  if (n < 0 && errno == EAGAIN) return Result::empty;
  if (n <= 0) {
    ::close(s.pipe);  // EOF (or an error that would repeat forever)
    s.pipe = -1;
    return Result::closed;
  }
  const size_t len = static_cast<size_t>(n);
  s.seen = true;
  // The pipe held at least a default pipe's worth: the writer outpaces us.
  if (!s.grown && len >= 64 * 1024) grow(s);
  const size_t keep = log_max_ == 0 ? len : static_cast<size_t>(std::min<uint64_t>(len, log_max_ - kept_));
  if (keep > 0) {
    // First: the other stream's link (if any) is replaced before the log
    // gets a byte that is not its own.
    const bool has_file = open_stream_file(s);
    const int err = open_log() ? write_all(logfd_, g_buf, keep) : log_state_;
    if (err != 0) log_lost_ += keep;  // outputLost: the disk was full
    note(&log_state_, "log", err);
    if (has_file && !s.linked) note(&s.state, s.name, write_all(s.file, g_buf, keep));
    kept_ += keep;
  }
  if (keep < len) count_dropped(s, len - keep);
  return Result::moved;
}

void Relay::drain(Stream& s) {
  // Until the pipe is empty or at EOF; bounded in case a process outside
  // the tree holds the write end and keeps writing.
  for (int i = 0; i < kDrainRounds; ++i)
    if (pump(s) != Result::moved) return;
}

}  // namespace sbxmon
