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

#include "supervisor/unique_fd.hpp"
#include "supervisor/utf8.hpp"

namespace sup {

namespace {

constexpr std::size_t kMaxLine = 16u << 20;  // a longer line is matched in pieces
constexpr std::size_t kLegacyRead = 1u << 20;

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
  bool slow = false;        // searched line by line, never through the set (see rebuild)
  bool done = false;        // matched or removed
  OnMatch fn;
};

struct LogWatch::Scanner {
  using Fired = std::vector<std::pair<std::shared_ptr<Entry>, ReadyMatch>>;

  std::vector<std::shared_ptr<Entry>> entries;
  bool dirty = true;
  std::unique_ptr<RE2::Set> sets[2];                  // per stream: 0 stdout, 1 stderr
  std::vector<std::shared_ptr<Entry>> members[2];     // set index -> entry
  std::vector<std::shared_ptr<Entry>> slow[2];
  std::size_t next = 0;          // the next chunk of the index to read
  std::uint64_t legacy_off = 0;  // without an index: bytes of `log` read
  std::string partial[2];        // each stream's line not ended yet
  std::size_t last_chunk[2] = {0, 0};
  std::int64_t last_time[2] = {0, 0};
  bool fresh[2] = {false, false};  // the stream got bytes since its last line was tried as a prompt

  bool live() const {
    return std::any_of(entries.begin(), entries.end(), [](const auto& e) { return !e->done; });
  }

  void rebuild() {
    std::erase_if(entries, [](const auto& e) { return e->done; });
    for (int s = 0; s < 2; ++s) {
      sets[s].reset();
      members[s].clear();
      slow[s].clear();
      RE2::Options o;
      o.set_log_errors(false);
      o.set_max_mem(64 << 20);
      auto set = std::make_unique<RE2::Set>(o, RE2::UNANCHORED);
      for (const auto& e : entries) {
        if (!reads(e->stream, s)) continue;
        // The set searches many lines at once, `^`/`$` at each line: a
        // superset of the matches per line, each checked on its line. \A,
        // \z and flags that may turn multi-line off mean text edges there:
        // such patterns are searched line by line.
        if (e->slow || set->Add("(?m)" + e->pattern, nullptr) < 0) {
          slow[s].push_back(e);
          continue;
        }
        members[s].push_back(e);
      }
      if (members[s].empty()) continue;
      if (!set->Compile()) {
        slow[s].insert(slow[s].end(), members[s].begin(), members[s].end());
        members[s].clear();
        continue;
      }
      sets[s] = std::move(set);
    }
    dirty = false;
  }

  bool searching(int s) {
    if (dirty) rebuild();
    return sets[s] || !slow[s].empty();
  }

  /// Lines of `region` (no newline at its end) against stream `s`'s conditions.
  void search(int s, std::string_view region, const std::string& cursor, std::int64_t time_us, Fired* fired) {
    if (!searching(s)) return;
    std::vector<const std::shared_ptr<Entry>*> candidates;
    if (sets[s]) {
      std::vector<int> hits;
      RE2::Set::ErrorInfo info{};
      if (sets[s]->Match(re2::StringPiece(region.data(), region.size()), &hits, &info)) {
        for (int h : hits) candidates.push_back(&members[s][static_cast<std::size_t>(h)]);
      } else if (info.kind != RE2::Set::kNoError) {
        for (const auto& e : members[s]) candidates.push_back(&e);  // out of memory: each one alone
      }
    }
    for (const auto& e : slow[s]) candidates.push_back(&e);
    for (const std::shared_ptr<Entry>* ep : candidates) {
      const std::shared_ptr<Entry>& e = *ep;
      if (e->done) continue;
      for (std::size_t pos = 0;;) {
        const std::size_t end = std::min(region.find('\n', pos), region.size());
        const std::string_view line = region.substr(pos, end - pos);
        re2::StringPiece m;
        if (e->re->Match(re2::StringPiece(line.data(), line.size()), 0, line.size(), RE2::UNANCHORED, &m, 1)) {
          e->done = true;
          dirty = true;
          ReadyMatch rm;
          rm.kind = ReadyCondition::Kind::log;
          rm.stream = s == 0 ? "stdout" : "stderr";
          rm.text = cut(line, kMaxMatchText);
          rm.match = cut(std::string_view(m.data(), m.size()), kMaxMatchText);
          rm.cursor = cursor;
          rm.time_us = time_us;
          fired->emplace_back(e, std::move(rm));
          break;
        }
        if (end >= region.size()) break;
        pos = end + 1;
      }
    }
  }

  /// One chunk of stream `s`.
  void take(int s, std::string_view data, const std::string& cursor, std::size_t chunk, std::int64_t time_us,
            Fired* fired) {
    std::string& p = partial[s];
    std::string_view view = data;
    if (!p.empty()) {
      p.append(data);
      view = p;
    }
    const std::size_t nl = view.rfind('\n');
    if (nl != std::string_view::npos) {
      search(s, view.substr(0, nl), cursor, time_us, fired);
      std::string rest(view.substr(nl + 1));
      p = std::move(rest);
    } else if (p.empty()) {
      p.assign(data);
    }
    if (p.size() > kMaxLine) {
      search(s, p, cursor, time_us, fired);
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
      if (at_end || partial[s].size() <= kMaxPromptBytes)
        search(s, partial[s], cursor_of(last_chunk[s]), last_time[s], fired);
      fresh[s] = false;
    }
  }
};

LogWatch::LogWatch(std::string dir) : dir_(std::move(dir)) {}
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
        s->dirty = true;
      }
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
  std::string buf;
  if (legacy_) {
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
  for (; s.next < index_.end(); ++s.next) {
    const LogChunk* c = index_.chunk(s.next);
    if (!c) {
      // Dropped by log_max: no line goes across the gap; on after it.
      if (s.next < index_.head_chunks() || s.next >= index_.kept_from()) return;  // not read yet
      s.partial[0].clear();
      s.partial[1].clear();
      s.next = index_.kept_from() - 1;
      continue;
    }
    if (c->stream == LogStream::marker) {  // sbxfs's own line: no line goes across it
      s.partial[0].clear();
      s.partial[1].clear();
      continue;
    }
    if (c->stream != LogStream::out && c->stream != LogStream::err) continue;
    const LogSelection sel = c->stream == LogStream::err ? LogSelection::err : LogSelection::out;
    if (index_.read(sel, index_.position(s.next, sel), c->length, &buf) != 0 || buf.size() != c->length)
      return;  // not all in the log yet: next time
    s.take(c->stream == LogStream::err ? 1 : 0, buf, cursor_of(s.next), s.next, c->time_us, fired);
  }
}

void LogWatch::pass(bool at_end) {
  if (main_ && !main_->live()) main_.reset();  // nothing left to look for: read nothing
  if (added_ && !added_->live()) added_.reset();
  if (!main_ && !added_) return;
  if (!open_index()) return;
  Fired fired;
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
  for (auto& [e, m] : fired)
    if (e->fn) {
      OnMatch fn = std::move(e->fn);
      e->fn = nullptr;
      fn(m);
    }
}

std::shared_ptr<LogWatch> LogWatches::of(const std::string& id) {
  auto& w = watches_[id];
  if (!w) w = std::make_shared<LogWatch>(dir_of_(id));
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
