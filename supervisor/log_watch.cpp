#include "supervisor/log_watch.hpp"

#include <fcntl.h>
#include <re2/re2.h>
#include <re2/set.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "supervisor/log_view.hpp"
#include "supervisor/log_watch_filter.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/unique_fd.hpp"
#include "supervisor/utf8.hpp"

namespace sup {

namespace {

constexpr std::size_t kMaxLine = 16u << 20;  // a longer line is matched in pieces
constexpr std::size_t kLegacyRead = 1u << 20;
constexpr std::size_t kMaxRead = 256u << 10;  // chunks read at once (a longer one alone)
// A region of at least kDenseMin bytes whose lines mostly pass the filter
// sends the next kDenseSkip regions past it.
constexpr std::size_t kDenseMin = 4096;
constexpr int kDenseSkip = 15;

std::int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool reads(ReadyCondition::Stream want, int s) {
  return want == ReadyCondition::Stream::both || (want == ReadyCondition::Stream::out) == (s == 0);
}

// At most `max` bytes, not ending inside a character.
std::string cut(std::string_view s, std::size_t max) {
  if (s.size() <= max) return std::string(s);
  std::string_view head = s.substr(0, max);
  head.remove_suffix(incomplete_utf8_tail(head));
  return std::string(head);
}

}  // namespace

struct LogWatch::Entry {
  std::uint64_t token = 0;
  ReadyCondition::Stream stream = ReadyCondition::Stream::both;
  std::string pattern;
  std::unique_ptr<RE2> re;  // per line, as the user wrote it
  bool slow = false;        // searched line by line, never through a set (see Group::build)
  std::optional<std::vector<std::string>> atoms;  // its literals (LogWatchFilter); none: every line is searched
  bool done = false;        // matched or removed
  OnMatch fn;
};

/// The matches of one pass, and how a matched line is shown.
struct LogWatch::Fired {
  const std::vector<std::string>& secrets;
  std::size_t blind;
  std::vector<std::pair<std::shared_ptr<Entry>, ReadyMatch>> hits;
  // A line that ends here is unfinished (a prompt, searched before its
  // newline): its last bytes may be the beginning of a secret being written.
  const char* open_end = nullptr;
};

/// Conditions searched together over the same lines: an RE2::Set finds
/// which of them may match somewhere in a region, each one's own regex then
/// finds its first line.
struct LogWatch::Group {
  using EntryPtr = std::shared_ptr<Entry>;

  std::unique_ptr<RE2::Set> set;
  std::vector<EntryPtr> members;  // set index -> entry
  std::vector<EntryPtr> slow;

  bool empty() const { return !set && slow.empty(); }

  void build(const std::vector<EntryPtr>& entries) {
    set.reset();
    members.clear();
    slow.clear();
    RE2::Options o;
    o.set_log_errors(false);
    o.set_max_mem(64 << 20);
    auto s = std::make_unique<RE2::Set>(o, RE2::UNANCHORED);
    for (const auto& e : entries) {
      // The set searches many lines at once, `^`/`$` at each line: a
      // superset of the matches per line, each checked on its line. \A,
      // \z and flags that may turn multi-line off mean text edges there:
      // such patterns are searched line by line.
      if (e->slow || s->Add("(?m)" + e->pattern, nullptr) < 0) {
        slow.push_back(e);
        continue;
      }
      members.push_back(e);
    }
    if (members.empty()) return;
    if (!s->Compile()) {
      slow.insert(slow.end(), members.begin(), members.end());
      members.clear();
      return;
    }
    set = std::move(s);
  }

  /// Lines of `region` (no newline at its end) against the group; returns how many matched.
  std::size_t search(int s, std::string_view region, const std::string& cursor, std::int64_t time_us,
                     Fired* fired) const {
    std::vector<const EntryPtr*> candidates;
    if (set) {
      std::vector<int> hits;
      RE2::Set::ErrorInfo info{};
      if (set->Match(re2::StringPiece(region.data(), region.size()), &hits, &info)) {
        for (int h : hits) candidates.push_back(&members[static_cast<std::size_t>(h)]);
      } else if (info.kind != RE2::Set::kNoError) {
        for (const auto& e : members) candidates.push_back(&e);  // out of memory: each one alone
      }
    }
    for (const auto& e : slow) candidates.push_back(&e);
    std::size_t matched = 0;
    for (const EntryPtr* ep : candidates) {
      const EntryPtr& e = *ep;
      if (e->done) continue;
      for (std::size_t pos = 0;;) {
        const std::size_t end = std::min(region.find('\n', pos), region.size());
        const std::string_view line = region.substr(pos, end - pos);
        re2::StringPiece m;
        if (e->re->Match(re2::StringPiece(line.data(), line.size()), 0, line.size(), RE2::UNANCHORED, &m, 1)) {
          e->done = true;
          ++matched;
          ReadyMatch rm;
          rm.kind = ReadyCondition::Kind::log;
          rm.stream = s == 0 ? "stdout" : "stderr";
          // Masked whole, then cut: neither the cut nor the match's edges
          // may leave part of a secret.
          std::string masked;
          std::string_view shown = line;
          if (!fired->secrets.empty()) {
            masked.assign(line);
            mask_secrets_in_place(masked, fired->secrets);
            if (line.data() + line.size() == fired->open_end) mask_secret_parts(masked, fired->secrets, false, true, fired->blind);
            shown = masked;
          }
          rm.text = cut(shown, kMaxMatchText);
          rm.match = cut(shown.substr(static_cast<std::size_t>(m.data() - line.data()), m.size()), kMaxMatchText);
          rm.cursor = cursor;
          rm.time_us = time_us;
          fired->hits.emplace_back(e, std::move(rm));
          break;
        }
        if (end >= region.size()) break;
        pos = end + 1;
      }
    }
    return matched;
  }
};

/// The conditions of one stream: those with literals are searched only on
/// the lines their filter lets through, the others on every line.
struct LogWatch::StreamConditions {
  using EntryPtr = std::shared_ptr<Entry>;

  Group every_line;
  Group filtered;
  std::optional<LogWatchFilter> filter;
  int unfiltered_regions = 0;  // regions `filtered` searches whole, the filter having let most lines through

  bool empty() const { return every_line.empty() && filtered.empty(); }

  void build(const std::vector<EntryPtr>& entries) {
    std::vector<EntryPtr> plain, with_atoms;
    std::vector<std::string> atoms;
    for (const auto& e : entries) {
      if (!e->atoms) {
        plain.push_back(e);
        continue;
      }
      with_atoms.push_back(e);
      atoms.insert(atoms.end(), e->atoms->begin(), e->atoms->end());
    }
    every_line.build(plain);
    filtered.build(with_atoms);
    filter.reset();
    if (!with_atoms.empty()) filter.emplace(atoms);
  }

  std::size_t search(int s, std::string_view region, const std::string& cursor, std::int64_t time_us,
                     Fired* fired) {
    std::size_t matched = 0;
    if (!every_line.empty()) matched += every_line.search(s, region, cursor, time_us, fired);
    if (filtered.empty()) return matched;
    if (unfiltered_regions > 0) {
      --unfiltered_regions;
      return matched + filtered.search(s, region, cursor, time_us, fired);
    }
    // Lines that follow each other are searched together: one set search for them all.
    std::size_t run_from = 0, run_to = 0, kept = 0;
    bool run = false;
    std::string_view line;
    for (std::size_t from = 0; filter->next(region, &from, &line);) {
      const std::size_t at = static_cast<std::size_t>(line.data() - region.data());
      kept += line.size() + 1;
      if (run && at == run_to + 1) {
        run_to = at + line.size();
        continue;
      }
      if (run) matched += filtered.search(s, region.substr(run_from, run_to - run_from), cursor, time_us, fired);
      run = true;
      run_from = at;
      run_to = at + line.size();
    }
    if (run) matched += filtered.search(s, region.substr(run_from, run_to - run_from), cursor, time_us, fired);
    // Most lines hold a literal (a pattern's word is in every line): for a
    // while the set alone searches, which is cheaper than the filter and the set.
    if (region.size() >= kDenseMin && kept * 2 > region.size()) unfiltered_regions = kDenseSkip;
    return matched;
  }
};

struct LogWatch::Scanner {
  using EntryPtr = std::shared_ptr<Entry>;

  std::vector<EntryPtr> entries;
  bool dirty = true;             // entries were added: the groups are built again before the next search
  std::size_t retired = 0;       // entries done since: left in the groups (skipped) until they are many
  StreamConditions streams[2];   // 0 stdout, 1 stderr
  std::size_t next = 0;          // the next chunk of the index to read
  std::uint64_t legacy_off = 0;  // without an index: bytes of `log` read
  std::string partial[2];        // each stream's line not ended yet
  std::size_t last_chunk[2] = {0, 0};
  std::int64_t last_time[2] = {0, 0};
  bool fresh[2] = {false, false};  // the stream got bytes since its last line was tried as a prompt

  bool live() const {
    return std::any_of(entries.begin(), entries.end(), [](const auto& e) { return !e->done; });
  }

  /// `n` more entries are done. Building the sets again costs about as much
  /// as compiling every pattern: it waits until half of them are done.
  void retire(std::size_t n) {
    retired += n;
    if (retired * 2 > entries.size()) dirty = true;
  }

  void rebuild() {
    std::erase_if(entries, [](const auto& e) { return e->done; });
    retired = 0;
    for (int s = 0; s < 2; ++s) {
      std::vector<EntryPtr> mine;
      for (const auto& e : entries)
        if (reads(e->stream, s)) mine.push_back(e);
      streams[s].build(mine);
    }
    dirty = false;
  }

  bool searching(int s) {
    if (dirty) rebuild();
    return !streams[s].empty();
  }

  /// Lines of `region` (no newline at its end) against stream `s`'s conditions.
  void search(int s, std::string_view region, const std::string& cursor, std::int64_t time_us, Fired* fired) {
    if (!searching(s)) return;
    retire(streams[s].search(s, region, cursor, time_us, fired));
  }

  /// One chunk of stream `s`.
  void take(int s, std::string_view data, const std::string& cursor, std::size_t chunk, std::int64_t time_us,
            Fired* fired) {
    std::string& p = partial[s];
    const std::size_t last_nl = data.rfind('\n');
    if (last_nl == std::string_view::npos) {
      p.append(data);
    } else {
      std::size_t from = 0;
      if (!p.empty()) {
        // Only the line begun before is put together; the others are searched where they are.
        const std::size_t nl = data.find('\n');
        p.append(data.substr(0, nl));
        search(s, p, cursor, time_us, fired);
        from = nl + 1;
      }
      if (from <= last_nl) search(s, data.substr(from, last_nl - from), cursor, time_us, fired);
      p.assign(data.substr(last_nl + 1));
    }
    if (p.size() > kMaxLine) {
      fired->open_end = p.data() + p.size();
      search(s, p, cursor, time_us, fired);
      fired->open_end = nullptr;
      p.clear();
    }
    last_chunk[s] = chunk;
    last_time[s] = time_us;
    fresh[s] = true;
  }

  /// Each stream's unfinished line, as a prompt (or, at the end, as a last line).
  void tails(bool at_end, const std::function<std::string(std::size_t)>& cursor_of, Fired* fired) {
    for (int s = 0; s < 2; ++s) {
      if (partial[s].empty() || !(fresh[s] || at_end)) continue;
      if (at_end || partial[s].size() <= kMaxPromptBytes) {
        if (!at_end) fired->open_end = partial[s].data() + partial[s].size();
        search(s, partial[s], cursor_of(last_chunk[s]), last_time[s], fired);
        fired->open_end = nullptr;
      }
      fresh[s] = false;
    }
  }
};

LogWatch::LogWatch(std::string dir, std::vector<std::string> secrets, std::size_t blind)
    : dir_(std::move(dir)), secrets_(std::move(secrets)), blind_(blind) {}
LogWatch::~LogWatch() = default;

std::uint64_t LogWatch::add(const ReadyCondition& c, OnMatch fn) {
  auto e = std::make_shared<Entry>();
  e->token = next_token_++;
  e->stream = c.stream;
  e->pattern = c.regex;
  RE2::Options o;
  o.set_log_errors(false);
  e->re = std::make_unique<RE2>(c.regex, o);
  e->slow = c.regex.find("\\A") != std::string::npos || c.regex.find("\\z") != std::string::npos ||
            c.regex.find("(?") != std::string::npos;
  e->atoms = LogWatchFilter::atoms_of(c.regex);
  e->fn = std::move(fn);
  if (!added_) added_ = std::make_unique<Scanner>();
  added_->entries.push_back(e);
  added_->dirty = true;
  return e->token;
}

void LogWatch::remove(std::uint64_t token) {
  for (Scanner* s : {main_.get(), added_.get()}) {
    if (!s) continue;
    for (auto& e : s->entries)
      if (e->token == token && !e->done) {
        e->done = true;
        s->retire(1);
      }
    // Now, not at the next output: a quiet command's readers that come and
    // go (each a compiled pattern) would pile up until it prints.
    if (!in_pass_ && s->dirty && s->retired > 0) s->rebuild();
  }
}

bool LogWatch::empty() const { return !(main_ && main_->live()) && !(added_ && added_->live()); }

std::string LogWatch::cursor_of(std::size_t chunk) const {
  if (legacy_) return {};  // no events to continue from
  char buf[48];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "-%zu", index_.run_id(), chunk);
  return buf;
}

bool LogWatch::open_index() {
  if (index_.is_open()) {
    (void)index_.refresh();  // on failure, what it holds is read; more next time
    return true;
  }
  if (legacy_) return true;
  const int err = index_.open(dir_);
  if (err == 0) return true;
  struct stat st {};
  // The index comes before the log: a log alone is a record of an older build.
  if (err == ENOENT && ::stat((dir_ + "/log").c_str(), &st) == 0 && ::stat((dir_ + "/index").c_str(), &st) != 0)
    legacy_ = true;
  return legacy_;
}

void LogWatch::feed(Scanner& s, Fired* fired) {
  if (legacy_) {
    std::string buf;
    UniqueFd fd(::open((dir_ + "/log").c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return;
    for (;;) {
      buf.resize(kLegacyRead);
      const ssize_t n = ::pread(fd.get(), buf.data(), buf.size(), static_cast<off_t>(s.legacy_off));
      if (n <= 0) return;
      buf.resize(static_cast<std::size_t>(n));
      s.legacy_off += static_cast<std::uint64_t>(n);
      s.take(0, buf, {}, 0, now_us(), fired);
    }
  }
  while (s.next < index_.end()) {
    const LogChunk* c = index_.chunk(s.next);
    if (!c) {
      // Dropped by log_max: no line goes across the gap; on after it.
      if (s.next < index_.head_chunks() || s.next >= index_.kept_from()) return;  // not read yet
      s.partial[0].clear();
      s.partial[1].clear();
      s.next = index_.kept_from();
      continue;
    }
    if (c->stream != LogStream::out && c->stream != LogStream::err) {
      if (c->stream == LogStream::marker) {  // sbxfs's own line: no line goes across it
        s.partial[0].clear();
        s.partial[1].clear();
      }
      ++s.next;
      continue;
    }
    // The chunks from here that follow each other in one data file: one read for all.
    std::shared_ptr<const UniqueFd> file;
    std::uint64_t file_off = 0, contiguous = 0;
    if (!index_.locate(LogSelection::all, index_.position(s.next, LogSelection::all), &file, &file_off, &contiguous))
      return;
    std::size_t total = c->length;
    std::uint64_t last = s.next + 1;
    for (const LogChunk* d; last < index_.end() && (d = index_.chunk(last)) && d->offset == c->offset + total &&
                            total + d->length <= kMaxRead;
         ++last)
      total += d->length;
    if (buf_.size() < total) buf_.resize(total);
    std::size_t got = 0;
    while (got < total) {
      const ssize_t n = ::pread(file->get(), buf_.data() + got, total - got, static_cast<off_t>(file_off + got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    for (; s.next < last; ++s.next) {
      const LogChunk* d = index_.chunk(s.next);
      const std::size_t at = static_cast<std::size_t>(d->offset - c->offset);
      if (at + d->length > got) return;  // not all in the log yet: next time
      if (d->stream == LogStream::marker) {
        s.partial[0].clear();
        s.partial[1].clear();
      }
      if (d->stream != LogStream::out && d->stream != LogStream::err) continue;
      s.take(d->stream == LogStream::err ? 1 : 0, std::string_view(buf_.data() + at, d->length), cursor_of(s.next),
             s.next, d->time_us, fired);
    }
  }
}

void LogWatch::pass(bool at_end) {
  in_pass_ = true;
  struct Done {
    bool& flag;
    ~Done() { flag = false; }
  } done{in_pass_};
  if (main_ && !main_->live()) main_.reset();  // nothing left to look for: read nothing
  if (added_ && !added_->live()) added_.reset();
  if (!main_ && !added_) {
    buf_ = std::string();  // nothing to read with it for now
    return;
  }
  if (!open_index()) return;
  Fired fired{secrets_, blind_, {}};
  auto tails = [&](Scanner& s) { s.tails(at_end, [this](std::size_t c) { return cursor_of(c); }, &fired); };
  if (main_) {
    feed(*main_, &fired);
    tails(*main_);
  }
  if (added_) {
    feed(*added_, &fired);  // from the start of the log
    tails(*added_);
    if (!main_) {
      main_ = std::move(added_);
    } else if (main_->next == added_->next && main_->legacy_off == added_->legacy_off) {
      // Both have read the same bytes, so their unfinished lines are the same: one scanner from here.
      for (auto& e : added_->entries) main_->entries.push_back(std::move(e));
      main_->dirty = true;
      added_.reset();
    }
  }
  fire(fired);
}

void LogWatch::output() { pass(false); }
void LogWatch::finish() { pass(true); }

void LogWatch::fire(Fired& fired) {
  for (auto& [e, m] : fired.hits)
    if (e->fn) {
      OnMatch fn = std::move(e->fn);
      e->fn = nullptr;
      fn(m);
    }
}

std::shared_ptr<LogWatch> LogWatches::of(const std::string& id) {
  auto& w = watches_[id];
  if (!w) w = std::make_shared<LogWatch>(dir_of_(id), secrets_of_(id), blind_);
  return w;
}

void LogWatches::output(const std::string& id) {
  if (auto it = watches_.find(id); it != watches_.end()) {
    std::shared_ptr<LogWatch> w = it->second;  // a callback may drop it from the map
    w->output();
  }
}

void LogWatches::finish(const std::string& id) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  std::shared_ptr<LogWatch> w = std::move(it->second);
  watches_.erase(it);
  w->finish();
}

}  // namespace sup
