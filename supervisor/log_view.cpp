#include "supervisor/log_view.hpp"

#include <errno.h>

#include <algorithm>
#include <limits>

#include "supervisor/secrets.hpp"

namespace sup {

namespace {

constexpr std::uint64_t kOpen = std::numeric_limits<std::uint64_t>::max();  // a last piece runs on

/// Masks the first bytes of `b` that may end a secret (its start was dropped).
void mask_secret_ends(std::string& b, const std::vector<std::string>& secrets, std::size_t blind) {
  std::fill_n(b.begin(), secret_part_at_cut(b, secrets, blind, true), '*');
}

/// Masks the last bytes of `b` that may begin a secret (its end was dropped).
void mask_secret_starts(std::string& b, const std::vector<std::string>& secrets, std::size_t blind) {
  const std::size_t k = secret_part_at_cut(b, secrets, blind, false);
  std::fill(b.end() - static_cast<std::ptrdiff_t>(k), b.end(), '*');
}

/// The number of the kept chunk that holds byte `pos` of `sel` (the last
/// chunk that begins at or before it: of a stream's selection, its own).
std::uint64_t chunk_holding(const LogIndex& index, LogSelection sel, std::uint64_t pos) {
  std::uint64_t a = 0, b = index.head_chunks();
  if (pos >= index.head_size(sel)) {
    a = index.kept_from();
    b = index.end();
  }
  while (b - a > 1) {
    const std::uint64_t mid = a + (b - a) / 2;
    if (index.position(mid, sel) <= pos) a = mid;
    else b = mid;
  }
  return a;
}

LogSelection selection_of(LogStream s) { return s == LogStream::err ? LogSelection::err : LogSelection::out; }

}  // namespace

void mask_secret_parts(std::string& bytes, const std::vector<std::string>& secrets, bool after_gap, bool before_gap,
                       std::size_t blind) {
  std::vector<std::string> real;
  for (const std::string& s : secrets)
    if (!s.empty()) real.push_back(s);
  if (after_gap) mask_secret_ends(bytes, real, blind);
  if (before_gap) mask_secret_starts(bytes, real, blind);
}

void mask_gap_edges(const LogIndex& index, LogSelection sel, std::uint64_t lo, std::string& bytes,
                    const std::vector<std::string>& secrets, std::size_t blind) {
  if (bytes.empty() || !index.tail_begun()) return;
  const std::uint64_t head_end = index.head_size(sel), kept = index.kept_start(sel);
  if (kept <= head_end) return;  // nothing was dropped (yet)
  std::vector<std::string> real;
  for (const std::string& s : secrets)
    if (!s.empty()) real.push_back(s);
  if (real.empty()) return;
  const std::uint64_t edge = std::max<std::uint64_t>(secret_reach(real), blind);
  const std::uint64_t hi = lo + bytes.size();
  std::string raw;
  // The end of a secret whose beginning was dropped: at the kept bytes' start.
  if (lo < kept + edge && hi > kept && index.read(sel, kept, static_cast<std::size_t>(edge), &raw) == 0) {
    const std::uint64_t part = secret_part_at_cut(raw, real, blind, true);
    for (std::uint64_t p = std::max(lo, kept); p < std::min(hi, kept + part); ++p) bytes[p - lo] = '*';
  }
  // The beginning of one whose end was dropped: at the head's end.
  const std::uint64_t from = head_end - std::min(head_end, edge);
  if (lo < head_end && hi > from && index.read(sel, from, static_cast<std::size_t>(head_end - from), &raw) == 0 &&
      raw.size() == head_end - from) {
    const std::uint64_t part = secret_part_at_cut(raw, real, blind, false);
    for (std::uint64_t p = std::max(lo, head_end - part); p < std::min(hi, head_end); ++p) bytes[p - lo] = '*';
  }
}

std::string log_marker_line(std::uint64_t log_max) {
  return "[sbxfs: log_max (" + std::to_string(log_max) +
         " bytes) reached: output dropped here is counted in droppedBytes; the latest output follows]\n";
}

LogView::LogView(LogSelection sel, std::vector<std::string> secrets, Masking masking, std::size_t blind)
    : sel_(sel), masking_(masking), secrets_(std::move(secrets)), blind_(blind) {
  std::erase_if(secrets_, [](const std::string& s) { return s.empty(); });
  reach_ = secret_reach(secrets_);
  pieces_.push_back(Piece{});
}

std::size_t LogView::piece_at(std::uint64_t off) const {
  auto it = std::upper_bound(pieces_.begin(), pieces_.end(), off,
                             [](std::uint64_t o, const Piece& p) { return o < p.view; });
  return static_cast<std::size_t>(it - pieces_.begin()) - 1;
}

std::uint64_t LogView::piece_end(std::size_t i) const { return i + 1 < pieces_.size() ? pieces_[i + 1].view : kOpen; }

void LogView::settle(const LogIndex& index) {
  if (!index.tail_begun()) return;  // nothing is dropped before the tail begins
  const std::uint64_t head_end = index.head_size(sel_), kept = index.kept_start(sel_);
  Piece& last = pieces_.back();  // always output: a marker is followed by what was kept after it
  const std::uint64_t gone_from = std::max(last.pos, head_end);
  if (gone_from >= kept) return;  // nothing of this piece was dropped
  const std::uint64_t gone_view = last.view + (gone_from - last.pos), kept_view = last.view + (kept - last.pos);
  if (served_ >= kept_view) return;  // the reader had passed all that was dropped
  const std::uint64_t at = std::max(gone_view, served_);
  if (at == last.view && pieces_.size() > 1) {
    last.pos = kept;  // nothing of it was shown yet: it just begins later
    return;
  }
  int before = '\n';
  if (at == served_ && last_ >= 0) {
    before = last_;
  } else if (at > last.view) {
    std::string b;
    if (index.read(sel_, last.pos + (at - 1 - last.view), 1, &b) == 0 && !b.empty()) before = b[0];
    else before = -1;  // unknown: the marker gets a line of its own
  }
  Piece marker{at, 0, std::string(before == '\n' ? "" : "\n") + log_marker_line(index.log_max())};
  const std::uint64_t after = at + marker.marker.size();
  pieces_.push_back(std::move(marker));
  pieces_.push_back(Piece{after, kept, {}});
}

std::uint64_t LogView::size(const LogIndex& index) const {
  const Piece& last = pieces_.back();
  const std::uint64_t end = index.size(sel_);
  return end > last.pos ? last.view + (end - last.pos) : last.view;
}

std::uint64_t LogView::held(const LogIndex& index) const {
  if (secrets_.empty()) return 0;
  const Piece& last = pieces_.back();
  const std::uint64_t end = index.size(sel_);
  if (!last.marker.empty() || end <= last.pos) return 0;
  // Before the last gap a secret's cut beginning is masked (settle()).
  return end - std::max(hold_from(index, sel_, holds_ ? *holds_ : stream_holds(index, secrets_, blind_)), last.pos);
}

void LogView::live(const LogIndex& index, bool running) {
  if (running && !secrets_.empty()) holds_ = stream_holds(index, secrets_, blind_);
  else holds_.reset();
}

std::uint64_t stream_hold(const LogIndex& index, LogStream s, const std::vector<std::string>& secrets,
                          std::size_t blind) {
  const std::uint64_t end = index.stream_size(s);
  const LogSelection sel = selection_of(s);
  std::uint64_t lo = end - std::min<std::uint64_t>(end, secret_reach(secrets));
  // Not back across what log_max dropped: a beginning cut by the gap is masked there.
  if (index.tail_begun() && end >= index.kept_start(sel)) lo = std::max(lo, index.kept_start(sel));
  std::string last;
  if (lo == end || index.read(sel, lo, static_cast<std::size_t>(end - lo), &last) != 0) return end;
  return end - secret_start_at_end(last, secrets, blind);
}

StreamHolds stream_holds(const LogIndex& index, const std::vector<std::string>& secrets, std::size_t blind) {
  return {stream_hold(index, LogStream::out, secrets, blind), stream_hold(index, LogStream::err, secrets, blind)};
}

bool chunk_held(const LogIndex& index, std::uint64_t n, const StreamHolds& holds) {
  const LogChunk* c = index.chunk(n);
  if (c == nullptr || (c->stream != LogStream::out && c->stream != LogStream::err)) return false;
  return index.position(n, selection_of(c->stream)) + c->length > holds[c->stream == LogStream::err];
}

bool chunk_held(const LogIndex& index, std::uint64_t n, const std::vector<std::string>& secrets, std::size_t blind) {
  const LogChunk* c = index.chunk(n);
  if (secrets.empty() || c == nullptr || (c->stream != LogStream::out && c->stream != LogStream::err)) return false;
  const std::uint64_t b = index.position(n, selection_of(c->stream)) + c->length;
  if (index.stream_size(c->stream) >= b + secret_reach(secrets)) return false;  // (a cheap look first)
  return b > stream_hold(index, c->stream, secrets, blind);
}

bool last_of_the_streams(const LogIndex& index, std::uint64_t n) {
  const LogChunk* c = index.chunk(n);
  if (c == nullptr) return false;
  // Bounded: the chunks after it of its own stream are within a secret's length.
  for (std::uint64_t k = n + 1; k < index.end(); ++k) {
    const LogChunk* later = index.chunk(k);
    if (later && later->stream != c->stream && (later->stream == LogStream::out || later->stream == LogStream::err))
      return false;
  }
  return true;
}

std::uint64_t hold_from(const LogIndex& index, LogSelection sel, const StreamHolds& holds) {
  if (sel == LogSelection::out) return holds[0];
  if (sel == LogSelection::err) return holds[1];
  const std::uint64_t end = index.size(LogSelection::all);
  for (const LogStream s : {LogStream::out, LogStream::err}) {
    const std::uint64_t p = holds[s == LogStream::err], size = index.stream_size(s);
    if (p >= size) continue;
    // Where that stream byte is in the log: held only when the log ends with it.
    const LogSelection own = selection_of(s);
    const std::uint64_t n = chunk_holding(index, own, p);
    const std::uint64_t at = index.position(n, LogSelection::all) + (p - index.position(n, own));
    if (at + (size - p) == end) return at;
  }
  return end;
}

int LogView::read(const LogIndex& index, std::uint64_t off, std::size_t size, std::string* out) {
  out->clear();
  std::string bytes;
  while (out->size() < size) {
    const std::uint64_t at = off + out->size();
    const std::size_t i = piece_at(at);
    const Piece& p = pieces_[i];
    const std::uint64_t end = piece_end(i);
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(size - out->size(), end - at));
    if (!p.marker.empty()) {
      out->append(p.marker, static_cast<std::size_t>(at - p.view), want);
      continue;
    }
    const std::uint64_t pos = p.pos + (at - p.view);
    // The piece's own bytes, widened for the masking but never past it.
    std::uint64_t lo = pos - std::min<std::uint64_t>(reach_, pos - p.pos);
    const std::uint64_t piece_last = end == kOpen ? kOpen : p.pos + (end - p.view);
    const std::uint64_t after = std::min<std::uint64_t>(reach_, piece_last - (pos + want));
    if (int err = index.read(sel_, lo, static_cast<std::size_t>(pos - lo + want + after), &bytes)) return err;
    if (bytes.size() < pos - lo && lo < pos) {  // what comes before was dropped
      lo = pos;
      if (int err = index.read(sel_, lo, want + static_cast<std::size_t>(after), &bytes)) return err;
    }
    if (bytes.size() <= pos - lo) {
      const bool dropped = index.tail_begun() && pos >= index.head_size(sel_) && pos < index.kept_start(sel_);
      if (dropped && out->empty()) return ENODATA;
      break;
    }
    if (!secrets_.empty()) {
      // Masked as the log's bytes show them, then what each stream's own
      // bytes show too (covered: from the raw bytes as well). Where those
      // mask anything, byte for byte: "****" for whole ones could not keep
      // both.
      const std::vector<bool> apart = sel_ == LogSelection::all
                                          ? secrets_of_streams(index, lo, bytes.size(), secrets_, holds_ ? &*holds_ : nullptr)
                                          : std::vector<bool>();
      if (masking_ == Masking::bytes || !apart.empty()) mask_secrets_in_place(bytes, secrets_);
      if (lo == p.pos && i > 0) mask_secret_ends(bytes, secrets_, blind_);
      if (end != kOpen && lo + bytes.size() == piece_last) mask_secret_starts(bytes, secrets_, blind_);
      mask_covered(bytes, apart, 0);
    }
    const std::size_t got = std::min(bytes.size() - static_cast<std::size_t>(pos - lo), want);
    out->append(bytes, static_cast<std::size_t>(pos - lo), got);
    if (got < want) break;
  }
  return 0;
}

std::vector<bool> secrets_of_streams(const LogIndex& index, std::uint64_t lo, std::size_t n,
                                     const std::vector<std::string>& secrets, const StreamHolds* holds) {
  const std::size_t reach = secret_reach(secrets);
  // Where each stream's chunks lie in [lo, hi) of the log, and where in
  // their own stream: a secret one stream wrote in pieces may have the
  // other's output between them here.
  struct Run {
    std::uint64_t at, pos, len;  // in the log, in its stream, how many bytes
  };
  std::vector<Run> runs[2];
  const std::uint64_t hi = lo + n;
  for (std::uint64_t c_n = chunk_holding(index, LogSelection::all, lo); c_n < index.end(); ++c_n) {
    if (c_n >= index.head_chunks() && c_n < index.kept_from()) c_n = index.kept_from();  // dropped ones
    const LogChunk* c = index.chunk(c_n);
    if (c == nullptr) break;
    const std::uint64_t at = index.position(c_n, LogSelection::all);
    if (at >= hi) break;
    if (c->stream != LogStream::out && c->stream != LogStream::err) continue;
    const std::uint64_t from = std::max(at, lo), to = std::min<std::uint64_t>(at + c->length, hi);
    if (from >= to) continue;
    const bool err = c->stream == LogStream::err;
    const std::uint64_t pos = index.position(c_n, err ? LogSelection::err : LogSelection::out) + (from - at);
    runs[err].push_back({from, pos, to - from});
  }
  std::vector<bool> covered;
  // A running command's beginnings of a secret (those the log ends with are held back).
  if (holds)
    for (int k = 0; k < 2; ++k)
      for (const Run& r : runs[k])
        for (std::uint64_t i = 0; i < r.len; ++i)
          if (r.pos + i >= (*holds)[k]) {
            if (covered.empty()) covered.assign(n, false);
            covered[static_cast<std::size_t>(r.at - lo + i)] = true;
          }
  // One stream alone here: the log's bytes are its own, and the window's
  // margins its context.
  if (runs[0].empty() || runs[1].empty()) return covered;
  // Each stream's own bytes there, with `reach` more of it on each side,
  // masked: what they mask is covered here.
  std::string own;
  for (int k = 0; k < 2; ++k) {
    const LogSelection sel = k ? LogSelection::err : LogSelection::out;
    const std::uint64_t first = runs[k].front().pos, last = runs[k].back().pos + runs[k].back().len;
    std::uint64_t from = first - std::min<std::uint64_t>(reach, first);
    if (index.read(sel, from, static_cast<std::size_t>(last + reach - from), &own) != 0) continue;
    if (own.size() < last - from && from < first) {  // what comes before was dropped
      from = first;
      if (index.read(sel, from, static_cast<std::size_t>(last + reach - from), &own) != 0) continue;
    }
    if (own.size() < last - from) continue;
    const std::string raw = own;
    mask_secrets_in_place(own, secrets);
    for (const Run& r : runs[k])
      for (std::uint64_t i = 0; i < r.len; ++i) {
        const auto at = static_cast<std::size_t>(r.pos - from + i);
        if (own[at] != raw[at]) {
          if (covered.empty()) covered.assign(n, false);
          covered[static_cast<std::size_t>(r.at - lo + i)] = true;
        }
      }
  }
  return covered;
}

void mask_covered(std::string& bytes, const std::vector<bool>& covered, std::size_t from) {
  for (std::size_t i = 0; i < bytes.size() && from + i < covered.size(); ++i)
    if (covered[from + i]) bytes[i] = '*';
}

bool LogView::locate(const LogIndex& index, std::uint64_t off, std::size_t size, std::size_t max_ranges,
                     std::shared_ptr<const UniqueFd>* file, std::vector<FileRange>* ranges) const {
  ranges->clear();
  file->reset();
  if (!secrets_.empty()) return false;  // (either masking changes bytes)
  const std::size_t i = piece_at(off);
  const Piece& p = pieces_[i];
  if (!p.marker.empty()) return false;
  const std::uint64_t end = std::min<std::uint64_t>(piece_end(i), off + size);
  std::uint64_t at = off;
  while (at < end) {
    std::shared_ptr<const UniqueFd> f;
    std::uint64_t file_off = 0, run = 0;
    if (!index.locate(sel_, p.pos + (at - p.view), &f, &file_off, &run)) break;
    if (*file && f != *file) return false;  // the head and a tail segment
    *file = std::move(f);
    run = std::min(run, end - at);
    if (!ranges->empty() && ranges->back().off + ranges->back().size == file_off) {
      ranges->back().size += static_cast<std::size_t>(run);
    } else {
      if (ranges->size() == max_ranges) return false;
      ranges->push_back({file_off, static_cast<std::size_t>(run)});
    }
    at += run;
  }
  if (at == off + size) return true;
  return at > off && i + 1 == pieces_.size() && p.pos + (at - p.view) >= index.size(sel_);
}

void LogView::served(std::uint64_t off, std::uint64_t n, int last) {
  if (n == 0 || off + n <= served_) return;
  served_ = off + n;
  last_ = last;
}

std::optional<std::string> log_view_end(const std::string& dir, LogSelection sel, std::size_t bytes,
                                        const std::vector<std::string>& secrets, std::size_t blind, bool running,
                                        LogView::Masking masking, std::uint64_t* size, bool* gap) {
  LogIndex index;
  if (index.open(dir) != 0) return std::nullopt;
  LogView view(sel, secrets, masking, blind);
  std::string out;
  std::uint64_t s = 0;
  // A rotation between the look and the read drops what was to be read: look again.
  for (int attempt = 0; attempt < 3; ++attempt) {
    view.settle(index);
    view.live(index, running);
    s = view.size(index) - (running ? view.held(index) : 0);
    const std::uint64_t from = s > bytes ? s - bytes : 0;
    if (view.read(index, from, static_cast<std::size_t>(s - from), &out) != ENODATA) break;
    out.clear();
    if (index.refresh() != 0) break;
  }
  if (size) *size = s;
  if (gap) *gap = view.has_gap();
  return out;
}

}  // namespace sup
