// procs/ID/events: the log as JSON lines, one event per chunk the monitor
// read, oldest first (supervisor/log_index.hpp holds the chunks):
//   {"type": "stdout"|"stderr", "cursor": C, "timestamp": T, "data": TEXT}
// (`dataBase64` when the bytes are not UTF-8), `truncated` where log_max
// dropped output, `restart` where a run ended and the restart policy runs
// the next ({"type": "restart", "cursor", "timestamp", "data": the log's
// marker line}), and once the command has ended a `terminal` event.
//
// Cursors are "RUN-POS": the run's id from the index header and the
// event's position: chunk i is at i; once the command has ended, N (the
// number of chunks) and N+1 hold what stdout and stderr ended with short of
// a whole character, N+2 the terminal event. An event starts at a character
// boundary: a chunk ending in the first bytes of a character leaves them to
// the next chunk of its stream. Each event thus depends on the chunks alone,
// and `events,since=C` starts exactly after C, in any later read, even of
// another daemon. A cursor of another run (a named slot started again) or
// one that is no cursor: EINVAL at the first read, with a line in `errors`.
#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "fsd/files.hpp"
#include "fsd/followed_read.hpp"
#include "fsd/json_object_writer.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/utf8.hpp"

namespace fsd {

namespace {

using ojson = nlohmann::ordered_json;

std::string base64(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16 | static_cast<unsigned char>(in[i + 1]) << 8 |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    const bool two = i + 1 < in.size();
    const unsigned v = static_cast<unsigned char>(in[i]) << 16 | (two ? static_cast<unsigned char>(in[i + 1]) << 8 : 0);
    out += kAlphabet[v >> 18];
    out += kAlphabet[(v >> 12) & 63];
    out += two ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool is_utf8(std::string_view in) {
  for (std::size_t i = 0; i < in.size();) {
    // Eight ASCII bytes at a time: most output is ASCII.
    std::uint64_t eight = 0;
    if (i + 8 <= in.size() && (std::memcpy(&eight, in.data() + i, 8), (eight & 0x8080808080808080u) == 0)) {
      i += 8;
      continue;
    }
    const std::size_t n = in[i] == '\0' ? 1 : sup::utf8_char_len(in, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

class EventsHandle : public FollowedReadHandle {
 public:
  EventsHandle(Filesystem& fs, const sup::CommandStatus& st, bool follow, std::optional<std::string> since)
      : FollowedReadHandle(fs, st, follow), since_(std::move(since)), secrets_(fs.sup().secrets(st.bg_id)) {
    for (const auto& s : secrets_) reach_ = std::max(reach_, s.size() - 1);
  }

 protected:
  Reply fetch(std::size_t size, off_t off, bool ended) override {
    std::lock_guard g(mu_);
    if (int err = ensure()) return Reply::error(err);
    const auto want = static_cast<std::uint64_t>(off);
    if (want < text_base_) restart();
    while (text_base_ + text_.size() < want + size && !finished_) {
      if (want > text_base_) {  // what the reader has passed is dropped
        const std::size_t drop = std::min<std::uint64_t>(want - text_base_, text_.size());
        text_.erase(0, drop);
        text_base_ += drop;
      }
      if (!next_event(ended)) break;
    }
    if (want < text_base_ || want >= text_base_ + text_.size()) return Reply::data({});
    return Reply::data(text_.substr(static_cast<std::size_t>(want - text_base_), size));
  }

  bool more_at(off_t off, bool ended) override {
    std::lock_guard g(mu_);
    if (ensure() != 0) return true;
    if (static_cast<std::uint64_t>(off) < text_base_ + text_.size()) return true;
    if (!index_.is_open() || finished_) return false;
    return pos_ < index_.chunks().size() || ended;
  }

 private:
  /// Opens the index once there is one and checks `since` against it.
  int ensure() {
    if (error_) return error_;
    if (index_.is_open()) return index_.refresh();
    const int err = index_.open(dir_);
    if (err == ENOENT) {
      struct stat st {};
      if (::stat((dir_ + "/log").c_str(), &st) == 0)
        return fail(ENODATA, "this record was written by an older sbxfs: it has no index of events");
      if (since_) return fail(EINVAL, "cursor from an earlier run: " + *since_);
      return 0;  // no output yet
    }
    if (err != 0) return err;
    if (since_) {
      std::uint64_t run = 0, pos = 0;
      int used = 0;
      if (std::sscanf(since_->c_str(), "%16" SCNx64 "-%" SCNu64 "%n", &run, &pos, &used) != 2 ||
          static_cast<std::size_t>(used) != since_->size())
        return fail(EINVAL, "not a cursor (cursor from an earlier run?): " + *since_);
      if (run != index_.run_id()) return fail(EINVAL, "cursor from an earlier run: " + *since_);
      first_ = pos + 1;
    }
    restart();
    return 0;
  }

  int fail(int err, const std::string& why) {
    error_ = err;
    std::string name = "procs/" + id_ + "/events";
    if (since_) name += ",since=" + *since_;
    fs_.errors().add(name, err, why, "", id_);
    return err;
  }

  void restart() {
    text_.clear();
    text_base_ = 0;
    pos_ = first_;
    finished_ = false;
  }

  std::string cursor(std::uint64_t pos) const {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%016" PRIx64 "-%" PRIu64, index_.run_id(), pos);
    return buf;
  }

  void add(const ojson& j) {
    text_ += j.dump();
    text_ += '\n';
  }

  /// Stream bytes [lo, hi) masked, read with `reach_` around them.
  /// False when the log does not hold them all yet.
  bool masked(sup::LogStream s, std::uint64_t lo, std::uint64_t hi, std::string* out) const {
    const std::uint64_t mlo = lo - std::min<std::uint64_t>(lo, reach_);
    std::string buf;
    if (index_.read_stream(s, mlo, static_cast<std::size_t>(hi + reach_ - mlo), &buf) != 0 || buf.size() < hi - mlo)
      return false;
    if (!secrets_.empty()) sup::mask_secrets_in_place(buf, secrets_);
    *out = buf.substr(static_cast<std::size_t>(lo - mlo), static_cast<std::size_t>(hi - lo));
    return true;
  }

  /// How many bytes of stream `s` before `at` begin a character not whole at `at`.
  std::size_t carry(sup::LogStream s, std::uint64_t at) const {
    const std::uint64_t lo = at - std::min<std::uint64_t>(at, 4);
    std::string buf;
    if (index_.read_stream(s, lo, static_cast<std::size_t>(at - lo), &buf) != 0) return 0;
    return sup::incomplete_utf8_tail(buf);
  }

  /// Written straight into the text: the data is most of the log, and
  /// building a json object of it to dump it was several times slower.
  void add_data(sup::LogStream s, std::uint64_t pos, std::int64_t time_us, const std::string& data) {
    JsonObjectWriter w(text_);
    w.str("type", s == sup::LogStream::err ? "stderr" : "stdout").str("cursor", cursor(pos));
    w.str("timestamp", sup::iso_of_us(time_us));
    if (is_utf8(data))
      w.str("data", data);
    else
      w.str("dataBase64", base64(data));
    w.close();
    text_ += '\n';
  }

  /// Appends the event at pos_ (none, for a chunk that holds only the
  /// start of a character) and moves on. False when there is none yet.
  bool next_event(bool ended) {
    if (!index_.is_open()) {
      // Nothing ran here (an empty slot), or a record torn on disk: its
      // terminal event says why.
      if (ended && !finished_) {
        const std::optional<sup::CommandStatus> st = fs_.sup().status(id_, sup::CpuFigure::skip);
        if (!st || st->state == "error") add(terminal());
      }
      finished_ = ended;
      return false;
    }
    const auto& chunks = index_.chunks();
    const std::uint64_t n = chunks.size();
    if (pos_ < n) {
      const sup::LogChunk& c = chunks[pos_];
      if (c.stream == sup::LogStream::marker && c.marker == sup::MarkerKind::restart) {
        std::string line(c.length, '\0');
        const ssize_t n = ::pread(index_.log_fd(), line.data(), line.size(), static_cast<off_t>(c.offset));
        if (n != static_cast<ssize_t>(line.size())) return false;  // not all in the log yet
        line.erase(std::remove(line.begin(), line.end(), '\n'), line.end());
        ojson j;
        j["type"] = "restart";
        j["cursor"] = cursor(pos_);
        j["timestamp"] = sup::iso_of_us(c.time_us);
        j["data"] = line;
        add(j);
        ++pos_;
        return true;
      }
      if (c.stream == sup::LogStream::marker) {
        const std::optional<sup::CommandStatus> st = fs_.sup().status(id_, sup::CpuFigure::skip);
        ojson j;
        j["type"] = "truncated";
        j["cursor"] = cursor(pos_);
        j["timestamp"] = sup::iso_of_us(c.time_us);
        j["droppedBytes"] = st ? st->dropped_bytes : 0;
        add(j);
        ++pos_;
        return true;
      }
      const std::uint64_t a = index_.chunk_start(pos_), b = a + c.length;
      const std::uint64_t from = a - carry(c.stream, a), to = b - carry(c.stream, b);
      std::string data;
      if (to > from) {
        if (!masked(c.stream, from, to, &data)) return false;  // not all in the log yet
        add_data(c.stream, pos_, c.time_us, data);
      }
      ++pos_;
      return true;
    }
    if (!ended) return false;
    if (pos_ == n || pos_ == n + 1) {  // what a stream ended with, short of a character
      const sup::LogStream s = pos_ == n ? sup::LogStream::out : sup::LogStream::err;
      const std::uint64_t end = index_.stream_size(s), left = carry(s, end);
      std::string data;
      if (left > 0 && masked(s, end - left, end, &data)) {
        std::int64_t time_us = 0;
        for (auto it = chunks.rbegin(); it != chunks.rend(); ++it)
          if (it->stream == s) {
            time_us = it->time_us;
            break;
          }
        add_data(s, pos_, time_us, data);
      }
      ++pos_;
      return true;
    }
    if (pos_ == n + 2) add(terminal());
    finished_ = true;
    return pos_ == n + 2;
  }

  ojson terminal() const {
    const std::optional<sup::CommandStatus> st = fs_.sup().status(id_, sup::CpuFigure::skip);
    ojson j;
    j["type"] = "terminal";
    const bool error = !st || st->state == "error";
    j["state"] = error ? "error" : "exited";
    j["cursor"] = cursor(index_.chunks().size() + 2);
    j["timestamp"] = st && !st->finished_at.empty() ? ojson(st->finished_at) : ojson(nullptr);
    if (error) {
      const nlohmann::json rec = st ? st->to_json() : nlohmann::json::object();
      j["error"] = rec.contains("error") ? ojson::parse(rec["error"].dump())
                                         : ojson{{"code", "ENOENT"}, {"message", "the record is gone"}};
      return j;
    }
    j["exit"] = {{"code", st->exit_code ? ojson(*st->exit_code) : ojson(nullptr)},
                 {"signal", st->signal.empty() ? ojson(nullptr) : ojson(st->signal)},
                 {"timedOut", st->timed_out}};
    j["endReason"] = st->end_reason;
    return j;
  }

  const std::optional<std::string> since_;
  const std::vector<std::string> secrets_;
  std::size_t reach_ = 0;

  std::mutex mu_;
  // Guarded by mu_:
  sup::LogIndex index_;
  int error_ = 0;               // the cursor was refused: every read says so
  std::uint64_t first_ = 0;     // the first position to show
  std::uint64_t pos_ = 0;       // the next position to generate
  std::string text_;            // events generated, from text_base_
  std::uint64_t text_base_ = 0;
  bool finished_ = false;       // the terminal event is in text_
};

}  // namespace

std::unique_ptr<Handle> open_events(Filesystem& fs, const Node& node, const OpenRequest&) {
  return std::make_unique<EventsHandle>(fs, *node.record, node.keys().has("follow"), node.keys().text("since"));
}

}  // namespace fsd
