#include "supervisor/log_index.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

namespace sup {

namespace {

void put_le(char* p, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

int pread_all(int fd, char* buf, std::size_t size, std::uint64_t off, std::size_t* got) {
  *got = 0;
  while (*got < size) {
    const ssize_t n = ::pread(fd, buf + *got, size - *got, static_cast<off_t>(off + *got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) break;
    *got += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

std::string encode_index_header(std::uint64_t run_id) {
  std::string h(kIndexHeaderSize, '\0');
  std::memcpy(h.data(), kIndexMagic, sizeof kIndexMagic);
  put_le(h.data() + 8, run_id, 8);
  return h;
}

void encode_index_entry(const LogChunk& c, char out[kIndexEntrySize]) {
  put_le(out, c.offset, 8);
  put_le(out + 8, static_cast<std::uint64_t>(c.time_us), 8);
  put_le(out + 16, c.length, 4);
  out[20] = static_cast<char>(c.stream);
  out[21] = static_cast<char>(c.stream == LogStream::marker ? c.marker : MarkerKind::log_max);
  out[22] = out[23] = 0;
}

std::string encode_index_entry(const LogChunk& c) {
  std::string e(kIndexEntrySize, '\0');
  encode_index_entry(c, e.data());
  return e;
}

LogIndex::LogIndex(LogIndex&& o) noexcept { *this = std::move(o); }

LogIndex& LogIndex::operator=(LogIndex&& o) noexcept {
  if (this == &o) return *this;
  if (index_fd_ >= 0) ::close(index_fd_);
  if (log_fd_ >= 0) ::close(log_fd_);
  index_fd_ = std::exchange(o.index_fd_, -1);
  log_fd_ = std::exchange(o.log_fd_, -1);
  run_id_ = o.run_id_;
  read_ = o.read_;
  chunks_ = std::move(o.chunks_);
  starts_ = std::move(o.starts_);
  out_ = std::move(o.out_);
  err_ = std::move(o.err_);
  out_size_ = o.out_size_;
  err_size_ = o.err_size_;
  return *this;
}

LogIndex::~LogIndex() {
  if (index_fd_ >= 0) ::close(index_fd_);
  if (log_fd_ >= 0) ::close(log_fd_);
}

int LogIndex::open(const std::string& dir) {
  *this = LogIndex();
  const int ifd = ::open((dir + "/index").c_str(), O_RDONLY | O_CLOEXEC);
  if (ifd < 0) return errno;
  char h[kIndexHeaderSize];
  std::size_t got = 0;
  int err = pread_all(ifd, h, sizeof h, 0, &got);
  // The monitor writes the header with one write before the log exists: a
  // short one is no index of ours.
  if (err == 0 && (got != sizeof h || std::memcmp(h, kIndexMagic, sizeof kIndexMagic) != 0)) err = EBADMSG;
  const int lfd = err == 0 ? ::open((dir + "/log").c_str(), O_RDONLY | O_CLOEXEC) : -1;
  if (err == 0 && lfd < 0) err = errno;
  if (err != 0) {
    ::close(ifd);
    return err;
  }
  index_fd_ = ifd;
  log_fd_ = lfd;
  run_id_ = get_le(h + 8, 8);
  read_ = kIndexHeaderSize;
  return refresh();
}

int LogIndex::refresh() {
  if (index_fd_ < 0) return EBADF;
  char buf[kIndexEntrySize * 2730];
  for (;;) {
    std::size_t got = 0;
    if (int err = pread_all(index_fd_, buf, sizeof buf, read_, &got)) return err;
    const std::size_t whole = got / kIndexEntrySize;
    for (std::size_t i = 0; i < whole; ++i) {
      const char* p = buf + i * kIndexEntrySize;
      LogChunk c;
      c.offset = get_le(p, 8);
      c.time_us = static_cast<std::int64_t>(get_le(p + 8, 8));
      c.length = static_cast<std::uint32_t>(get_le(p + 16, 4));
      c.stream = static_cast<LogStream>(p[20]);
      c.marker = static_cast<MarkerKind>(p[21]);
      if (c.stream != LogStream::out && c.stream != LogStream::err && c.stream != LogStream::marker) continue;
      const std::size_t n = chunks_.size();
      starts_.push_back(c.stream == LogStream::err ? err_size_ : out_size_);
      if (in_stream(c.stream, LogStream::out)) {
        out_.push_back({out_size_, n});
        out_size_ += c.length;
      }
      if (in_stream(c.stream, LogStream::err)) {
        err_.push_back({err_size_, n});
        err_size_ += c.length;
      }
      chunks_.push_back(c);
    }
    read_ += whole * kIndexEntrySize;
    if (got < sizeof buf) return 0;
  }
}

const std::vector<LogIndex::Prefix>& LogIndex::prefixes(LogStream stream) const {
  return stream == LogStream::err ? err_ : out_;
}

std::uint64_t LogIndex::stream_size(LogStream stream) const {
  return stream == LogStream::err ? err_size_ : out_size_;
}

int LogIndex::read_stream(LogStream stream, std::uint64_t off, std::size_t size, std::string* out) const {
  out->clear();
  const std::vector<Prefix>& pre = prefixes(stream);
  // The last chunk that starts at or before `off`.
  auto it = std::upper_bound(pre.begin(), pre.end(), off, [](std::uint64_t o, const Prefix& p) { return o < p.start; });
  if (it == pre.begin()) return 0;
  --it;
  for (; it != pre.end() && out->size() < size; ++it) {
    const LogChunk& c = chunks_[it->chunk];
    const std::uint64_t skip = off > it->start ? off - it->start : 0;
    if (skip >= c.length) continue;
    const std::size_t want = std::min<std::uint64_t>(c.length - skip, size - out->size());
    const std::size_t at = out->size();
    out->resize(at + want);
    std::size_t got = 0;
    if (int err = pread_all(log_fd_, out->data() + at, want, c.offset + skip, &got)) return err;
    out->resize(at + got);
    if (got < want) break;  // the log holds less than the index says (the disk was full)
  }
  return 0;
}

bool LogIndex::locate(LogStream stream, std::uint64_t off, std::uint64_t* log_off, std::uint64_t* contiguous) const {
  const std::vector<Prefix>& pre = prefixes(stream);
  auto it = std::upper_bound(pre.begin(), pre.end(), off, [](std::uint64_t o, const Prefix& p) { return o < p.start; });
  if (it == pre.begin()) return false;
  --it;
  const LogChunk& c = chunks_[it->chunk];
  if (off - it->start >= c.length) return false;
  *log_off = c.offset + (off - it->start);
  *contiguous = c.length - (off - it->start);
  return true;
}

std::string iso_of_us(std::int64_t us) {
  const time_t secs = static_cast<time_t>(us / 1000000);
  struct tm tm {};
  ::gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%.*s.%03dZ", static_cast<int>(n), buf, static_cast<int>((us / 1000) % 1000));
  return out;
}

std::size_t incomplete_utf8_tail(std::string_view b) {
  // Look back over at most three continuation bytes for a lead byte whose
  // character would need more bytes than are there.
  for (std::size_t back = 1; back <= 4 && back <= b.size(); ++back) {
    const auto c = static_cast<unsigned char>(b[b.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further
    const std::size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 1;
    if (c >= 0xF5) return 0;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace sup
