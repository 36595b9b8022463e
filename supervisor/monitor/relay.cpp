// sbxfs-monitor: the output relay (command pipes -> log and index).
//
// Each chunk read from a stream's pipe is written once, to `log` (both
// streams, in the order read), and described by one 24-byte entry appended
// to `index` (stream, offset in log, length, time read): stdout, stderr,
// the events and the timestamped views are served from these two files
// (supervisor/log_index.hpp). Plain read()+write(): tee(2)+splice(2) into
// files was measured slower on this kernel (the in-kernel copy from pipe
// pages cost ~3x the copy from a user buffer). A 256 KiB buffer and a pipe
// grown to 1 MiB took the most off: fewer wake-ups of the monitor and of
// the writer. The pipe grows at the first read that finds 16 KiB waiting:
// a copy of 1 GiB read ~21 KiB a read on average, so waiting for a full
// 64 KiB pipe left it at its default size (+3 % with the growth,
// bench/RESULTS.md, "Capture: the writer sets the pace").
// An index entry per chunk read costs one small write per read, so 24
// bytes per up to 256 KiB of output.
//
// `index` and `log` are created just after the start is reported (off the
// start's path: on ext4 every file created at start cost 15-200 us,
// bench/RESULTS.md), the index first, so that the daemon, which watches the
// index of a record that has one, finds it when the log appears.
//
// Past log_max (supervisor/FORMAT.md, "The tail"): the head (`log`,
// `index`) keeps the first half of log_max, then the output goes to tail
// segments `tail-G` + `tail-G.index`, each up to a quarter; when a third
// begins, the oldest is removed (its index first). So the state directory
// holds about log_max of output per command whatever the command prints,
// each byte is still written once, and every file is at any moment a
// prefix of what it will be: a monitor killed anywhere leaves a coherent
// record. `dropped` is created at the first byte dropped and kept at the
// size of the count (a sparse file, no blocks). The cost is per read, never
// per byte: a comparison, and a rotation per quarter of log_max.
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

// A pipe found busy is grown to this (the default pipe-max-size). Not at
// start: pipe pages count against the user's pipe-user-pages-soft (64 MiB
// by default), past which an unprivileged user's new pipes get 2 pages.
constexpr int kBigPipe = 1 << 20;
constexpr size_t kBusyRead = 16 * 1024;
// The smallest read cap log_max sets (below, Relay::Relay): a tiny
// log_max must not make a read, a write and a rotation per byte.
constexpr size_t kLeastRead = 64;
// drain(): rounds before giving up on a writer outside the tree that never stops.
constexpr int kDrainRounds = 1024;

// Only the pages a read touched count in the monitor's memory.
char g_buf[Relay::kReadBuffer];

}  // namespace

Relay::Relay(int dirfd, uint64_t log_max, Stream& out, Stream& err)
    : dirfd_(dirfd), log_max_(log_max), caps_(sup::log_caps(log_max)), out_(out), err_(err) {
  // Past log_max only the latest quarter to half is kept, in the order of
  // the reads. The two pipes fill side by side while the monitor is away
  // (up to 1 MiB each), so one read larger than that could push the other
  // stream's last output out of the tail although the command wrote both at
  // once. Reads of at most half a segment, taken in turn, leave the last
  // read of each stream in the tail. (Which stream wrote first is not
  // known across two pipes: one that wrote last, after the other's burst,
  // may be read before that burst's end.)
  if (log_max_ > 0)
    read_max_ = static_cast<size_t>(std::clamp<uint64_t>(caps_.segment / 2, kLeastRead, Relay::kReadBuffer));
}

Relay::~Relay() {
  for (int fd : {head_.data, head_.index, dropped_fd_})
    if (fd >= 0) ::close(fd);
  for (int i = 0; i < tails_; ++i) {
    ::close(tail_[i].data);
    ::close(tail_[i].index);
  }
}

bool Relay::open_log() {
  if (head_.data >= 0) return true;
  if (head_.index < 0) {
    head_.index = ::openat(dirfd_, "index", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (head_.index < 0) {
      note(&index_state_, "index", errno);  // tried again at the next chunk
      return false;
    }
    // Any value that differs between two runs of a slot: cursors of one
    // run are refused by the next.
    struct timespec now {};
    ::clock_gettime(CLOCK_REALTIME, &now);
    run_id_ = (static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec)) ^
              (static_cast<uint64_t>(::getpid()) << 40);
    const std::string header = sup::encode_index_header(run_id_);
    if (int err = write_all(head_.index, header.data(), header.size())) {
      // A torn header is no index: none yet, tried again at the next chunk.
      note(&index_state_, "index", err);
      ::close(head_.index);
      head_.index = -1;
      ::unlinkat(dirfd_, "index", 0);
      return false;
    }
    head_.index_bytes = header.size();
  }
  head_.data = ::openat(dirfd_, "log", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  if (head_.data < 0) note(&log_state_, "log", errno);  // tried again at the next chunk
  return head_.data >= 0;
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

uint64_t Relay::append(Part& p, sup::LogStream stream, const char* buf, size_t len, int64_t time_us,
                       sup::MarkerKind kind) {
  const bool head = p.generation == 0;
  if (head) (void)open_log();
  // No file: why it could not be made (the log's, else the index's, made first).
  int err = p.data < 0 ? (log_state_ != 0 ? log_state_ : index_state_ != 0 ? index_state_ : EBADF)
                       : write_all(p.data, buf, len);
  uint64_t wrote = len;
  if (err != 0) {
    // What did reach the file is indexed, so that later chunks stay in place.
    const off_t end = p.data >= 0 ? ::lseek(p.data, 0, SEEK_END) : -1;
    wrote = end > static_cast<off_t>(p.bytes) ? static_cast<uint64_t>(end) - p.bytes : 0;
    log_lost_ += len - wrote;  // outputLost: the disk was full
  }
  note(&log_state_, head ? "log" : "a tail segment", err);
  if (wrote == 0) return 0;
  char entry[sup::kIndexEntrySize];
  sup::LogChunk chunk{p.bytes, time_us, static_cast<uint32_t>(wrote), stream};
  chunk.marker = kind;
  sup::encode_index_entry(chunk, entry);
  if (int ierr = add_entry(p, entry)) {
    // Bytes no entry tells would be hidden from every reader and counted
    // nowhere: they are taken back too (shrinking needs no space), and lost.
    note(&index_state_, "index", ierr);
    if (p.data >= 0) (void)::ftruncate(p.data, static_cast<off_t>(p.bytes));
    log_lost_ += wrote;
    return 0;
  }
  note(&index_state_, "index", 0);
  p.bytes += wrote;
  ++p.entries;
  ++chunks_;
  if (stream == sup::LogStream::marker) marks_ += wrote;
  else (stream == sup::LogStream::err ? err_pos_ : out_pos_) += wrote;
  if (stream != sup::LogStream::marker) last_stream_ = stream;
  last_byte_ = buf[wrote - 1];
  return wrote;
}

int Relay::add_entry(Part& p, const char* entry) {
  const int err = p.index < 0 ? EBADF : write_all(p.index, entry, sup::kIndexEntrySize);
  if (err != 0) {
    if (p.index >= 0) (void)::ftruncate(p.index, static_cast<off_t>(p.index_bytes));
    return err;
  }
  p.index_bytes += sup::kIndexEntrySize;
  return 0;
}

uint64_t Relay::room(const Part& p, uint64_t cap) const {
  // The index is capped too, so that tiny reads cannot make it outgrow its bytes.
  if (p.entries >= sup::entry_cap(cap)) return 0;
  return cap > p.bytes ? cap - p.bytes : 0;
}

void Relay::restart_marker(const std::string& text) {
  // Between two runs: on a line of its own, like the log_max marker. The
  // newline that ends the last run's unfinished line is of that line's
  // stream, not of the marker, which shows in both streams: the other one,
  // whose last line was complete, would get an empty line.
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t time_us = static_cast<int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
  if (last_byte_ != '\n') keep(last_stream_, "\n", 1, time_us);
  const std::string line = text + "\n";
  keep(sup::LogStream::marker, line.data(), line.size(), time_us, sup::MarkerKind::restart);
}

void Relay::keep(sup::LogStream stream, const char* buf, size_t len, int64_t time_us, sup::MarkerKind kind) {
  if (log_max_ == 0) {
    append(head_, stream, buf, len, time_us, kind);
    return;
  }
  if (!head_done_) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, room(head_, caps_.head)));
    if (n > 0) {
      if (append(head_, stream, buf, n, time_us, kind) < n) {
        log_lost_ += len - n;  // the head could not take it: nor the rest
        return;
      }
      buf += n;
      len -= n;
    }
    if (len == 0) return;
    // The head is complete: say so at its end, where readers look. Until
    // that is written, no reader would find the tail: what would go there
    // is lost, and the next output tries again.
    char entry[sup::kIndexEntrySize];
    sup::encode_index_entry({head_.bytes, time_us, 0, sup::LogStream::continued}, entry);
    const int err = add_entry(head_, entry);
    note(&index_state_, "index", err);
    if (err != 0) {
      log_lost_ += len;
      return;
    }
    head_done_ = true;
    head_end_ = whole_pos();
  }
  keep_in_tail(stream, buf, len, time_us, kind);
}

void Relay::keep_in_tail(sup::LogStream stream, const char* buf, size_t len, int64_t time_us,
                         sup::MarkerKind kind) {
  const uint64_t cap = caps_.segment;
  while (len > 0) {
    if (tails_ == 0 || room(tail_[tails_ - 1], cap) == 0) {
      // Two more segments follow one made now before this read ends, so it
      // would be removed at once: its bytes are dropped unwritten.
      if (len > 2 * cap) {
        skip(stream, static_cast<size_t>(cap));
        buf += cap;
        len -= static_cast<size_t>(cap);
        continue;
      }
      if (!rotate(time_us)) {
        log_lost_ += len;
        return;
      }
    }
    Part& cur = tail_[tails_ - 1];
    const size_t n = static_cast<size_t>(std::min<uint64_t>(len, room(cur, cap)));
    if (append(cur, stream, buf, n, time_us, kind) < n) {
      log_lost_ += len - n;
      return;
    }
    buf += n;
    len -= n;
  }
}

bool Relay::rotate(int64_t) {
  Part p;
  p.generation = generation_ + 1;
  p.start = whole_pos();
  const std::string data = sup::tail_data_name(p.generation), index = sup::tail_index_name(p.generation);
  p.data = ::openat(dirfd_, data.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
  int err = p.data < 0 ? errno : 0;
  if (err == 0) {
    p.index = ::openat(dirfd_, index.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (p.index < 0) err = errno;
  }
  if (err == 0) {
    const std::string header = sup::encode_tail_header(
        {run_id_, p.generation, head_end_, chunks_, out_pos_ + marks_, err_pos_ + marks_, log_max_, p.start});
    err = write_all(p.index, header.data(), header.size());
    p.index_bytes = header.size();
  }
  note(&tail_state_, "a tail segment", err);
  if (err != 0) {
    for (int fd : {p.data, p.index})
      if (fd >= 0) ::close(fd);
    ::unlinkat(dirfd_, index.c_str(), 0);
    ::unlinkat(dirfd_, data.c_str(), 0);
    return false;
  }
  generation_ = p.generation;
  tail_[tails_++] = p;
  while (tails_ > 2) remove_oldest();
  count_dropped();
  return true;
}

void Relay::skip(sup::LogStream stream, size_t len) {
  // The segments kept so far would be pushed out by the same newer ones.
  while (tails_ > 0) remove_oldest();
  (stream == sup::LogStream::err ? err_pos_ : out_pos_) += len;
  ++chunks_;  // a number of its own, so that the gap shows in the cursors
  count_dropped();
}

void Relay::remove_oldest() {
  const Part p = tail_[0];
  // The index first: readers find a segment by its index.
  ::unlinkat(dirfd_, sup::tail_index_name(p.generation).c_str(), 0);
  ::unlinkat(dirfd_, sup::tail_data_name(p.generation).c_str(), 0);
  ::close(p.index);
  ::close(p.data);
  for (int i = 1; i < tails_; ++i) tail_[i - 1] = tail_[i];
  --tails_;
}

void Relay::count_dropped() {
  const uint64_t kept_from = tails_ > 0 ? tail_[0].start : whole_pos();
  const uint64_t gone = kept_from - head_end_;
  if (gone == dropped_) return;
  dropped_ = gone;
  if (dropped_fd_ < 0) {
    dropped_fd_ = ::openat(dirfd_, "dropped", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (dropped_fd_ < 0) diag("cannot create dropped: %s", ::strerror(errno));
  }
  if (dropped_fd_ >= 0 && ::ftruncate(dropped_fd_, static_cast<off_t>(dropped_)) != 0)
    diag("cannot update dropped: %s", ::strerror(errno));
}

Relay::Result Relay::pump(Stream& s) {
  if (s.pipe < 0) return Result::closed;
  const ssize_t n = ::read(s.pipe, g_buf, read_max_);
  if (n < 0 && errno == EINTR) return Result::moved;  // nothing lost: try again
  if (n < 0 && errno == EAGAIN) return Result::empty;
  if (n <= 0) {
    ::close(s.pipe);  // EOF (or an error that would repeat forever)
    s.pipe = -1;
    return Result::closed;
  }
  const size_t len = static_cast<size_t>(n);
  // A quarter of a default pipe waited: the writer keeps pace with us.
  if (!s.grown && len >= std::min(kBusyRead, read_max_)) grow(s);
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t time_us = static_cast<int64_t>(now.tv_sec) * 1000000 + now.tv_nsec / 1000;
  keep(&s == &err_ ? sup::LogStream::err : sup::LogStream::out, g_buf, len, time_us);
  return Result::moved;
}

void Relay::drain() {
  // Until both pipes are empty or at EOF; in turn, as while the command
  // runs (an end found both full, and one stream drained before the other
  // pushed that one's last output out of the tail). Bounded in case a
  // process outside the tree holds a write end and keeps writing.
  // The bound is in bytes (kDrainRounds full reads): a small read cap
  // (log_max) must not leave a full pipe's end unread.
  const std::size_t rounds = kDrainRounds * (Relay::kReadBuffer / read_max_);
  bool out = true, err = true;
  for (std::size_t i = 0; i < rounds && (out || err); ++i) {
    if (out) out = pump(out_) == Result::moved;
    if (err) err = pump(err_) == Result::moved;
  }
}

}  // namespace sbxmon
