// sbxfs-monitor: the output relay (command pipes -> log and index).
//
// Each chunk read from a stream's pipe is written once, to `log` (both
// streams, in the order read), and described by one 24-byte entry appended
// to `index` (stream, offset in log, length, time read): stdout, stderr,
// the events and the timestamped views are served from these two files
// (supervisor/log_index.hpp). Plain read()+write(): tee(2)+splice(2) into
// files was measured slower on this kernel (the in-kernel copy from pipe
// pages cost ~3x the copy from a user buffer). A 256 KiB buffer and a pipe
// grown to 1 MiB once it is found full took the most off: fewer wake-ups of
// the monitor and of the writer. An index entry per chunk read costs one
// small write per read, so 24 bytes per up to 256 KiB of output.
//
// `index` and `log` are created just after the start is reported (off the
// start's path: on ext4 every file created at start cost 15-200 us,
// bench/RESULTS.md), the index first, so that the daemon, which watches the
// index of a record that has one, finds it when the log appears.
//
// The log keeps the first log_max bytes of output; past that, stdout and
// stderr are still drained (the command never blocks on a full pipe) and
// counted, not kept: `dropped` is created and its size (a sparse file, no
// blocks) is the count; the log gets one marker line (a marker chunk).
#include "monitor.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <string>

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
  if (indexfd_ < 0) {
    indexfd_ = ::openat(dirfd_, "index", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (indexfd_ < 0) {
      note(&index_state_, "index", errno);  // tried again at the next chunk
      return false;
    }
    // Any value that differs between two runs of a slot: cursors of one
    // run are refused by the next.
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    const uint64_t run = (static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec)) ^
                         (static_cast<uint64_t>(::getpid()) << 40);
    const std::string header = sup::encode_index_header(run);
    note(&index_state_, "index", write_all(indexfd_, header.data(), header.size()));
  }
  logfd_ = ::openat(dirfd_, "log", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
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

void Relay::append(sup::LogStream stream, const char* buf, size_t len, int64_t time_us, sup::MarkerKind kind) {
  int err = open_log() ? write_all(logfd_, buf, len) : log_state_;
  uint64_t wrote = len;
  if (err != 0) {
    // What did reach the log is indexed, so that later chunks stay in place.
    const off_t end = ::lseek(logfd_, 0, SEEK_END);
    wrote = end > static_cast<off_t>(log_end_) ? static_cast<uint64_t>(end) - log_end_ : 0;
    log_lost_ += len - wrote;  // outputLost: the disk was full
  }
  note(&log_state_, "log", err);
  if (wrote == 0) return;
  char entry[sup::kIndexEntrySize];
  sup::encode_index_entry({log_end_, time_us, static_cast<uint32_t>(wrote), stream, kind}, entry);
  log_end_ += wrote;
  last_byte_ = buf[wrote - 1];
  note(&index_state_, "index", write_all(indexfd_, entry, sizeof entry));
}

void Relay::mark(int64_t time_us) {
  // On a line of its own: a newline first unless the kept bytes end with one.
  char line[256];
  int len = snprintf(line, sizeof line,
                     "%s[sbxfs: log_max (%llu bytes) reached: later output is counted in droppedBytes, not kept]\n",
                     last_byte_ == '\n' ? "" : "\n", static_cast<unsigned long long>(log_max_));
  if (len > 0) append(sup::LogStream::marker, line, static_cast<size_t>(len), time_us);
}

void Relay::restart_marker(const std::string& text) {
  // Between two runs: on a line of its own, like the log_max marker.
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const std::string line = (last_byte_ == '\n' ? "" : "\n") + text + "\n";
  append(sup::LogStream::marker, line.data(), line.size(),
         static_cast<int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000, sup::MarkerKind::restart);
}

void Relay::count_dropped(size_t n, int64_t time_us) {
  if (dropped_ == 0) mark(time_us);
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
  // The pipe held at least a default pipe's worth: the writer outpaces us.
  if (!s.grown && len >= 64 * 1024) grow(s);
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t time_us = static_cast<int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
  const size_t keep = log_max_ == 0 ? len : static_cast<size_t>(std::min<uint64_t>(len, log_max_ - kept_));
  if (keep > 0) append(&s == &err_ ? sup::LogStream::err : sup::LogStream::out, g_buf, keep, time_us);
  kept_ += keep;
  if (keep < len) count_dropped(len - keep, time_us);
  return Result::moved;
}

void Relay::drain(Stream& s) {
  // Until the pipe is empty or at EOF; bounded in case a process outside
  // the tree holds the write end and keeps writing.
  for (int i = 0; i < kDrainRounds; ++i)
    if (pump(s) != Result::moved) return;
}

}  // namespace sbxmon
