#include "supervisor/log_index.hpp"

#include <dirent.h>
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
    const bool short_read = static_cast<std::size_t>(n) < size - *got;
    *got += static_cast<std::size_t>(n);
    // Only regular files come here: a short read is their end (for now),
    // so no second read to learn it.
    if (short_read) break;
  }
  return 0;
}

constexpr std::size_t idx(LogSelection s) { return static_cast<std::size_t>(s); }

}  // namespace

std::uint64_t tail_generation_of(const char* name) {
  unsigned long long g = 0;
  int used = 0;
  if (std::sscanf(name, "tail-%llu.index%n", &g, &used) != 1 || name[used] != '\0' || std::strncmp(name, "tail-", 5) != 0)
    return 0;
  return g;
}

std::vector<std::uint64_t> tail_generations(const std::string& dir) {
  std::vector<std::uint64_t> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d))
    if (const std::uint64_t g = tail_generation_of(e->d_name)) out.push_back(g);
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

LogCaps log_caps(std::uint64_t log_max) {
  LogCaps c;
  c.head = std::max<std::uint64_t>(1, log_max / 2);
  c.segment = std::max<std::uint64_t>(1, (log_max - std::min(log_max, c.head)) / 2);
  return c;
}

std::uint64_t entry_cap(std::uint64_t part_bytes) { return std::max<std::uint64_t>(64, part_bytes / kIndexEntrySize); }

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

std::string encode_tail_header(const TailHeader& h) {
  std::string s(kTailHeaderSize, '\0');
  std::memcpy(s.data(), kTailMagic, sizeof kTailMagic);
  const std::uint64_t fields[] = {h.run_id,     h.generation, h.head_end, h.first_chunk,
                                  h.out_before, h.err_before, h.log_max,  h.all_before};
  for (std::size_t i = 0; i < std::size(fields); ++i) put_le(s.data() + 8 + 8 * i, fields[i], 8);
  return s;
}

bool decode_tail_header(const char* p, std::size_t n, TailHeader* h) {
  const bool v1 = n >= sizeof kTailMagicV1 && std::memcmp(p, kTailMagicV1, sizeof kTailMagicV1) == 0;
  h->size = v1 ? kTailHeaderSizeV1 : kTailHeaderSize;
  if (n < h->size || (!v1 && std::memcmp(p, kTailMagic, sizeof kTailMagic) != 0)) return false;
  std::uint64_t* fields[] = {&h->run_id,     &h->generation, &h->head_end, &h->first_chunk,
                             &h->out_before, &h->err_before, &h->log_max,  &h->all_before};
  const std::size_t count = (h->size - 8) / 8;
  for (std::size_t i = 0; i < count; ++i) *fields[i] = get_le(p + 8 + 8 * i, 8);
  // Its restart lines count twice here (that build's error, not repairable).
  if (v1) h->all_before = h->out_before + h->err_before;
  return true;
}

std::string tail_data_name(std::uint64_t generation) { return "tail-" + std::to_string(generation); }
std::string tail_index_name(std::uint64_t generation) { return tail_data_name(generation) + ".index"; }

std::optional<std::uint64_t> tail_dropped_bytes(const std::string& dir) {
  for (const std::uint64_t g : tail_generations(dir)) {
    UniqueFd fd(::open((dir + "/" + tail_index_name(g)).c_str(), O_RDONLY | O_CLOEXEC));
    char buf[kTailHeaderSize];
    std::size_t got = 0;
    TailHeader h;
    if (!fd || pread_all(fd.get(), buf, sizeof buf, 0, &got) != 0 || !decode_tail_header(buf, got, &h)) continue;
    return h.all_before > h.head_end ? h.all_before - h.head_end : 0;
  }
  return std::nullopt;
}

bool head_continued(const std::string& dir) {
  UniqueFd fd(::open((dir + "/index").c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0) return false;
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size < kIndexHeaderSize + kIndexEntrySize) return false;
  const std::uint64_t last = kIndexHeaderSize + ((size - kIndexHeaderSize) / kIndexEntrySize - 1) * kIndexEntrySize;
  char e[kIndexEntrySize];
  std::size_t got = 0;
  return pread_all(fd.get(), e, sizeof e, last, &got) == 0 && got == sizeof e &&
         static_cast<LogStream>(e[20]) == LogStream::continued;
}

int LogIndex::open(const std::string& dir) {
  *this = LogIndex();
  UniqueFd ifd(::open((dir + "/index").c_str(), O_RDONLY | O_CLOEXEC));
  if (!ifd) return errno;
  char h[kIndexHeaderSize];
  std::size_t got = 0;
  if (int err = pread_all(ifd.get(), h, sizeof h, 0, &got)) return err;
  // The monitor makes the file, then writes the header with one write,
  // then makes the log: a short header without a log is an index just made
  // (or torn, and about to go), none yet; with a log, read again (written
  // since), it is a damaged one.
  if (got != sizeof h) {
    struct stat log {};
    if (::stat((dir + "/log").c_str(), &log) != 0) return ENOENT;
    if (int err = pread_all(ifd.get(), h, sizeof h, 0, &got)) return err;
  }
  if (got != sizeof h || std::memcmp(h, kIndexMagic, sizeof kIndexMagic) != 0) return EBADMSG;
  UniqueFd lfd(::open((dir + "/log").c_str(), O_RDONLY | O_CLOEXEC));
  if (!lfd) return errno;
  dir_ = dir;
  run_id_ = get_le(h + 8, 8);
  Part head;
  head.data = std::make_shared<const UniqueFd>(std::move(lfd));
  head.index = std::move(ifd);
  head.parsed = kIndexHeaderSize;
  parts_.push_back(std::move(head));
  return refresh();
}

int LogIndex::parse(Part& p) {
  const bool head = p.generation == 0;
  char buf[kIndexEntrySize * 2730];
  for (;;) {
    std::size_t got = 0;
    if (int err = pread_all(p.index.get(), buf, sizeof buf, p.parsed, &got)) return err;
    const std::size_t whole = got / kIndexEntrySize;
    for (std::size_t i = 0; i < whole; ++i) {
      const char* e = buf + i * kIndexEntrySize;
      LogChunk c;
      c.offset = get_le(e, 8);
      c.time_us = static_cast<std::int64_t>(get_le(e + 8, 8));
      c.length = static_cast<std::uint32_t>(get_le(e + 16, 4));
      c.stream = static_cast<LogStream>(e[20]);
      c.marker = static_cast<MarkerKind>(e[21]);
      if (head && c.stream == LogStream::continued) tail_begun_ = true;
      // log_max markers are an older build's, in the head only; restart
      // markers may be anywhere; unknown values are skipped.
      if (c.stream != LogStream::out && c.stream != LogStream::err &&
          (c.stream != LogStream::marker || (!head && c.marker != MarkerKind::restart)))
        continue;
      At at = p.end;
      at[idx(LogSelection::all)] = p.start[idx(LogSelection::all)] + c.offset;
      const auto n = static_cast<std::uint32_t>(p.chunks.size());
      for (const LogSelection s : {LogSelection::out, LogSelection::err})
        if (in_selection(c.stream, s)) {
          p.of_stream[idx(s)].push_back(n);
          p.end[idx(s)] += c.length;
        }
      p.end[idx(LogSelection::all)] = at[idx(LogSelection::all)] + c.length;
      p.chunks.push_back(c);
      p.at.push_back(at);
    }
    p.parsed += whole * kIndexEntrySize;
    if (got < sizeof buf) return 0;
  }
}

bool LogIndex::open_segment(std::uint64_t generation, bool* retry) {
  UniqueFd ifd(::open((dir_ + "/" + tail_index_name(generation)).c_str(), O_RDONLY | O_CLOEXEC));
  if (!ifd) return false;
  char buf[kTailHeaderSize];
  std::size_t got = 0;
  TailHeader h;
  if (pread_all(ifd.get(), buf, sizeof buf, 0, &got) != 0) return false;
  if (!decode_tail_header(buf, got, &h)) {
    // A header is written with one write just after the file is made.
    if (got < h.size) {
      *retry = true;
      return false;
    }
    seen_generation_ = generation;  // not ours: skipped
    return true;
  }
  seen_generation_ = generation;
  UniqueFd dfd(::open((dir_ + "/" + tail_data_name(generation)).c_str(), O_RDONLY | O_CLOEXEC));
  if (!dfd || h.run_id != run_id_) return true;  // removed meanwhile (or not this run's)
  Part p;
  p.data = std::make_shared<const UniqueFd>(std::move(dfd));
  p.index = std::move(ifd);
  p.generation = generation;
  p.first = h.first_chunk;
  p.start = {h.all_before, h.out_before, h.err_before};
  p.end = p.start;
  p.parsed = h.size;
  log_max_ = h.log_max;
  parts_.push_back(std::move(p));
  return true;
}

void LogIndex::discover() {
  bool retry = false;
  // While one of ours is still there, newer ones are the next generations;
  // else the folder says which there are.
  if (parts_.size() > 1) {
    while (open_segment(seen_generation_ + 1, &retry)) {
    }
    return;
  }
  for (const std::uint64_t g : tail_generations(dir_)) {
    if (g <= seen_generation_) continue;
    if (!open_segment(g, &retry) && retry) return;
  }
}

int LogIndex::refresh() {
  if (parts_.empty()) return EBADF;
  if (int err = parse(parts_[0])) return err;
  if (!tail_begun_) return 0;
  // Forget the segments the monitor removed (always the oldest first):
  // their bytes count as dropped, and no disk space stays held for them.
  while (parts_.size() > 1) {
    struct stat st {};
    if (::fstat(parts_[1].index.get(), &st) != 0 || st.st_nlink > 0) break;
    parts_.erase(parts_.begin() + 1);
  }
  discover();
  // Parsed after the discovery: a segment is complete once a newer one
  // exists, so the segments read cover the output without a break.
  for (std::size_t i = 1; i < parts_.size(); ++i)
    if (int err = parse(parts_[i])) return err;
  return 0;
}

bool LogIndex::superseded() const {
  if (parts_.empty()) return false;
  struct stat now {}, ours {};
  if (::fstat(parts_[0].index.get(), &ours) != 0) return false;
  return ::stat((dir_ + "/index").c_str(), &now) != 0 || now.st_ino != ours.st_ino || now.st_dev != ours.st_dev;
}

std::uint64_t LogIndex::head_chunks() const { return parts_.empty() ? 0 : parts_[0].chunks.size(); }

std::uint64_t LogIndex::kept_from() const { return parts_.size() > 1 ? parts_[1].first : head_chunks(); }

std::uint64_t LogIndex::end() const {
  if (parts_.empty()) return 0;
  return parts_.back().first + parts_.back().chunks.size();
}

const LogChunk* LogIndex::chunk(std::uint64_t n) const {
  for (const Part& p : parts_)
    if (n >= p.first && n - p.first < p.chunks.size()) return &p.chunks[static_cast<std::size_t>(n - p.first)];
  return nullptr;
}

std::uint64_t LogIndex::position(std::uint64_t n, LogSelection sel) const {
  for (const Part& p : parts_)
    if (n >= p.first && n - p.first < p.chunks.size()) return p.at[static_cast<std::size_t>(n - p.first)][idx(sel)];
  return size(sel);
}

std::uint64_t LogIndex::size(LogSelection sel) const { return parts_.empty() ? 0 : parts_.back().end[idx(sel)]; }

std::uint64_t LogIndex::head_size(LogSelection sel) const { return parts_.empty() ? 0 : parts_[0].end[idx(sel)]; }

std::uint64_t LogIndex::kept_start(LogSelection sel) const {
  return parts_.size() > 1 ? parts_[1].start[idx(sel)] : head_size(sel);
}

const LogIndex::Part* LogIndex::part_of(LogSelection sel, std::uint64_t off) const {
  for (const Part& p : parts_)
    if (off >= p.start[idx(sel)] && off < p.end[idx(sel)]) return &p;
  return nullptr;
}

int LogIndex::read_part(const Part& p, LogSelection sel, std::uint64_t off, std::size_t size, std::string* out) const {
  const int fd = p.data->get();
  // One buffer of the size the part can give (no growing: each doubling
  // copied and zero-filled what came before, into fresh pages).
  const std::size_t base = out->size();
  const std::uint64_t end = p.end[idx(sel)];
  const std::size_t want = off >= end ? 0 : static_cast<std::size_t>(std::min<std::uint64_t>(size, end - off));
  out->resize(base + want);
  std::size_t put = base;
  auto done = [&](int err) {
    out->resize(put);
    return err;
  };
  if (sel == LogSelection::all) {
    std::size_t got = 0;
    const int err = pread_all(fd, out->data() + put, want, off - p.start[0], &got);
    put += got;
    return done(err);
  }
  const std::vector<std::uint32_t>& list = p.of_stream[idx(sel)];
  // The last chunk of the stream that starts at or before `off`.
  auto it = std::upper_bound(list.begin(), list.end(), off,
                             [&](std::uint64_t o, std::uint32_t i) { return o < p.at[i][idx(sel)]; });
  if (it == list.begin()) return done(0);
  --it;
  for (; it != list.end() && put < base + want; ++it) {
    const LogChunk& c = p.chunks[*it];
    const std::uint64_t begin = p.at[*it][idx(sel)];
    const std::uint64_t skip = off > begin ? off - begin : 0;
    if (skip >= c.length) continue;
    const std::size_t part = static_cast<std::size_t>(std::min<std::uint64_t>(c.length - skip, base + want - put));
    std::size_t got = 0;
    if (int err = pread_all(fd, out->data() + put, part, c.offset + skip, &got)) return done(err);
    put += got;
    if (got < part) break;  // the file holds less than the index says (the disk was full)
  }
  return done(0);
}

int LogIndex::read(LogSelection sel, std::uint64_t off, std::size_t size, std::string* out) const {
  out->clear();
  while (out->size() < size) {
    const std::uint64_t at = off + out->size();
    const Part* p = part_of(sel, at);
    if (!p) break;
    const std::size_t before = out->size();
    if (int err = read_part(*p, sel, at, size - before, out)) return err;
    if (out->size() == before) break;
    if (off + out->size() < p->end[idx(sel)] || p == &parts_.back() || (p + 1)->start[idx(sel)] != p->end[idx(sel)])
      break;  // short (the disk was full), at the end, or at a break
  }
  return 0;
}

bool LogIndex::locate(LogSelection sel, std::uint64_t off, std::shared_ptr<const UniqueFd>* file,
                      std::uint64_t* file_off, std::uint64_t* contiguous) const {
  const Part* p = part_of(sel, off);
  if (!p) return false;
  *file = p->data;
  if (sel == LogSelection::all) {
    *file_off = off - p->start[0];
    *contiguous = p->end[0] - off;
    return true;
  }
  const std::vector<std::uint32_t>& list = p->of_stream[idx(sel)];
  auto it = std::upper_bound(list.begin(), list.end(), off,
                             [&](std::uint64_t o, std::uint32_t i) { return o < p->at[i][idx(sel)]; });
  if (it == list.begin()) return false;
  --it;
  const LogChunk& c = p->chunks[*it];
  const std::uint64_t into = off - p->at[*it][idx(sel)];
  if (into >= c.length) return false;
  *file_off = c.offset + into;
  *contiguous = c.length - into;
  return true;
}

const std::vector<LogChunk>& LogIndex::chunks() const {
  static const std::vector<LogChunk> kNone;
  return parts_.empty() ? kNone : parts_[0].chunks;
}

std::uint64_t LogIndex::stream_size(LogStream stream) const {
  return size(stream == LogStream::err ? LogSelection::err : LogSelection::out);
}

int LogIndex::read_stream(LogStream stream, std::uint64_t off, std::size_t size, std::string* out) const {
  return read(stream == LogStream::err ? LogSelection::err : LogSelection::out, off, size, out);
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
