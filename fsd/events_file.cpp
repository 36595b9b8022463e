// procs/ID/events: the log as JSON lines, one event per chunk the monitor
// read, oldest first (supervisor/log_index.hpp holds the chunks):
//   {"type": "stdout"|"stderr", "cursor": C, "timestamp": T, "data": TEXT}
// (`dataBase64` when the bytes are not UTF-8), `truncated` where log_max
// dropped output, `restart` where a run ended and the restart policy runs
// the next ({"type": "restart", "cursor", "timestamp", "data": the log's
// marker line}), and once the command has ended a `terminal` event.
//
// Cursors are "RUN-POS": the run's id from the index header and the
// event's position: chunk n is at n (numbers count the dropped chunks
// too, so they stay valid while the tail rotates); once the command has
// ended, N (one past the last chunk) and N+1 hold what stdout and stderr
// ended with short of a whole character, N+2 the terminal event. An event
// starts at a character boundary: a chunk ending in the first bytes of a
// character leaves them to the next chunk of its stream (unless log_max
// dropped that one). Each event thus depends on the chunks alone, and
// `events,since=C` starts exactly after C, in any later read, even of
// another daemon. A cursor of another run (a named slot started again):
// EINVAL at the first read, with a line in `errors`; one that is no cursor
// fails the open (check_events_keys).
//
// Past log_max, the chunks dropped after the head are one `truncated`
// event, at the position of the last of them, whose droppedBytes counts
// the bytes gone between the event before it and the one after it. A
// reader that falls behind the rotation, or a cursor of a chunk dropped
// since, gets such an event for what it missed, then the chunks kept.
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
#include "supervisor/log_view.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/utf8.hpp"

namespace fsd {

namespace {

/// An event's cursor: the run's id and the event's place in it.
std::string cursor_of(std::uint64_t run, std::uint64_t pos) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "-%" PRIu64, run, pos);
  return buf;
}

/// The run and place of `text`, when it is a cursor exactly as cursor_of()
/// writes one (sscanf alone would take "-1" or "01").
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_cursor(const std::string& text) {
  std::uint64_t run = 0, pos = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "%16" SCNx64 "-%" SCNu64 "%n", &run, &pos, &used) != 2 ||
      static_cast<std::size_t>(used) != text.size() || cursor_of(run, pos) != text)
    return std::nullopt;
  return std::pair{run, pos};
}

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
      : FollowedReadHandle(fs, st, follow),
        since_(std::move(since)),
        secrets_(fs.sup().secrets(st.bg_id)),
        blind_(fs.sup().secret_blind()),
        opened_end_(st.over() ? std::optional<sup::CommandStatus>(st) : std::nullopt) {
    reach_ = sup::secret_reach(secrets_);
    // Bound now to the run it was opened on: a slot run again, or the
    // record removed, before the first read leaves this file that run's.
    std::lock_guard g(mu_);
    (void)ensure();
  }

 protected:
  Reply fetch(std::size_t size, off_t off, bool ended) override {
    std::lock_guard g(mu_);
    if (std::optional<sup::Error> e = ensure()) return Reply::fail(*e);
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
    if (ensure()) return true;
    if (static_cast<std::uint64_t>(off) < text_base_ + text_.size()) return true;
    if (!index_.is_open() || finished_) return false;
    if (ended) return true;
    const sup::LogChunk* c = pos_ < index_.end() ? index_.chunk(pos_) : nullptr;
    return c && !held(pos_);
  }

 private:
  /// Opens the index once there is one and checks `since` against it.
  std::optional<sup::Error> ensure() {
    if (error_) return error_;
    if (index_.is_open()) {
      if (int err = index_.refresh()) return sup::error_from_errno(err, "reading the index of " + id_);
      return std::nullopt;
    }
    bool taken = false;
    const int err = open_index(index_, &taken);
    if (taken) return std::nullopt;
    if (err == ENOENT) {
      struct stat st {};
      if (::stat((dir_ + "/log").c_str(), &st) == 0 && ::stat((dir_ + "/index").c_str(), &st) != 0)
        return fail(sup::Errc::no_data, "this record was written by an older sbxfs: it has no index of events");
      if (since_) {
        // A record that never ran has run 0 with its terminal event at 2:
        // after it nothing, after a position before it that event.
        if (const auto c = parse_cursor(*since_); c && c->first == 0 && ended()) {
          if (c->second > 2)
            return fail(sup::Errc::invalid_argument,
                        "no such event: the last of this run is " + cursor_of(0, 2) + ": " + *since_);
          past_terminal_ = c->second == 2;
          return std::nullopt;
        }
        return fail(sup::Errc::invalid_argument, "cursor from an earlier run: " + *since_);
      }
      return std::nullopt;  // no output yet
    }
    if (err != 0) return sup::error_from_errno(err, "reading the index of " + id_);
    if (since_) {
      const auto cursor = parse_cursor(*since_);
      if (!cursor) return fail(sup::Errc::invalid_argument, "not a cursor: " + *since_);
      const auto [run, pos] = *cursor;
      if (run != index_.run_id()) return fail(sup::Errc::invalid_argument, "cursor from an earlier run: " + *since_);
      // Once the command has ended, the terminal event is the last there is.
      if (ended() && pos > index_.end() + 2)
        return fail(sup::Errc::invalid_argument, "no such event: the last of this run is " +
                                                     cursor_of(run, index_.end() + 2) + ": " + *since_);
      first_ = pos + 1;
    }
    restart();
    return std::nullopt;
  }

  sup::Error fail(sup::Errc code, const std::string& why) {
    error_ = sup::Error{code, why};
    std::string name = "events";
    if (since_) name += ",since=" + *since_;
    fs_.errors().add("procs/" + id_ + "/" + name, sup::errno_of(code), why, name, id_);
    return *error_;
  }

  void restart() {
    text_.clear();
    text_base_ = 0;
    pos_ = first_;
    finished_ = false;
    // Where the output was after the event before the first shown, when known.
    prev_end_.reset();
    if (first_ > 0)
      if (const sup::LogChunk* c = index_.chunk(first_ - 1))
        prev_end_ = index_.position(first_ - 1, sup::LogSelection::all) + c->length;
  }

  std::string cursor(std::uint64_t pos) const { return cursor_of(index_.run_id(), pos); }

  static sup::LogSelection selection(sup::LogStream s) {
    return s == sup::LogStream::err ? sup::LogSelection::err : sup::LogSelection::out;
  }
  /// log_max dropped bytes of stream `s` after the head.
  bool gap_in(sup::LogStream s) const {
    return index_.tail_begun() && index_.kept_start(selection(s)) > index_.head_size(selection(s));
  }
  /// The lowest position of `s` that bytes before `at` can be read from
  /// without crossing what log_max dropped.
  std::uint64_t floor_of(sup::LogStream s, std::uint64_t at) const { return floor_in(selection(s), at); }
  /// The same for a position `at` of selection `sel`.
  std::uint64_t floor_in(sup::LogSelection sel, std::uint64_t at) const {
    const std::uint64_t kept = index_.kept_start(sel);
    return index_.tail_begun() && at >= kept ? kept : 0;
  }

  /// Whether chunk `n` holds some of the last bytes of its stream that may
  /// begin a secret the command is writing in pieces: while it runs, its
  /// event (and those after it) waits for the rest.
  bool held(std::uint64_t n) const { return sup::chunk_held(index_, n, secrets_, blind_); }

  /// Stream bytes [lo, hi) masked, read with `reach_` around them.
  /// False when the log does not hold them all yet.
  bool masked(sup::LogStream s, std::uint64_t lo, std::uint64_t hi, std::string* out) const {
    const std::uint64_t mlo = std::max(lo - std::min<std::uint64_t>(lo, reach_), floor_of(s, lo));
    std::string buf;
    if (index_.read_stream(s, mlo, static_cast<std::size_t>(hi + reach_ - mlo), &buf) != 0 || buf.size() < hi - mlo)
      return false;
    if (!secrets_.empty()) sup::mask_secrets_in_place(buf, secrets_);
    *out = buf.substr(static_cast<std::size_t>(lo - mlo), static_cast<std::size_t>(hi - lo));
    // A secret cut by the gap: its part on this side is masked too.
    if (!secrets_.empty()) sup::mask_gap_edges(index_, selection(s), lo, *out, secrets_, blind_);
    return true;
  }

  /// The bytes of chunk `n` (its stream's [a, a + length), in `data`, which
  /// begins at stream byte `from`) that a secret covers in the log's own
  /// order become '*': one that the two streams wrote in turn, as `log`
  /// masks it.
  void mask_in_log_order(std::uint64_t n, const sup::LogChunk& c, std::uint64_t a, std::uint64_t from,
                         std::string& data) const {
    const std::uint64_t at = index_.position(n, sup::LogSelection::all);
    const std::uint64_t lo = std::max(at - std::min<std::uint64_t>(at, reach_), floor_in(sup::LogSelection::all, at));
    std::string raw;
    if (index_.read(sup::LogSelection::all, lo, static_cast<std::size_t>(at + c.length + reach_ - lo), &raw) != 0) return;
    const std::vector<bool> covered = sup::covered_bytes(raw, secrets_);
    for (std::uint64_t k = at; k < at + c.length && k - lo < covered.size(); ++k) {
      const std::uint64_t i = (k - at) + (a - from);
      if (covered[k - lo] && i < data.size()) data[i] = '*';
    }
  }

  /// How many bytes of stream `s` before `at` begin a character not whole at `at`.
  std::size_t carry(sup::LogStream s, std::uint64_t at) const {
    const std::uint64_t lo = std::max(at - std::min<std::uint64_t>(at, 4), floor_of(s, at));
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

  void add_truncated(std::uint64_t pos, std::int64_t time_us, std::uint64_t dropped) {
    JsonObjectWriter w(text_);
    w.str("type", "truncated").str("cursor", cursor(pos)).str("timestamp", sup::iso_of_us(time_us));
    w.num("droppedBytes", static_cast<std::int64_t>(dropped));
    w.close();
    text_ += '\n';
  }

  /// The time of the last chunk of `s` (0: none is kept).
  std::int64_t last_time(sup::LogStream s) const {
    for (std::uint64_t k = index_.end(); k-- > 0;) {
      const sup::LogChunk* c = index_.chunk(k);
      if (!c) {
        if (k <= index_.head_chunks()) break;
        k = index_.head_chunks();  // over what was dropped, to the head's last
        continue;
      }
      if (c->stream == s) return c->time_us;
    }
    return 0;
  }

  /// Appends the event at pos_ (none, for a chunk that holds only the
  /// start of a character) and moves on. False when there is none yet.
  bool next_event(bool ended) {
    if (!index_.is_open()) {
      // Nothing ran here (a queued command stopped, a record torn on disk):
      // its terminal event says how it ended. An empty slot has no end.
      if (ended && !finished_ && !past_terminal_) {
        const std::optional<sup::CommandStatus> st = status_if_ours();
        if (!st || st->state != "empty") add_terminal();
      }
      finished_ = ended;
      return false;
    }
    const std::uint64_t n = index_.end();
    if (pos_ < n) {
      const sup::LogChunk* c = index_.chunk(pos_);
      if (!c) {
        // Dropped by log_max: one event for the whole gap.
        const std::uint64_t kept = index_.kept_from();
        if (pos_ >= kept) return false;  // not read yet
        const sup::LogChunk* next = index_.chunk(kept);
        const sup::LogChunk* before = pos_ > 0 ? index_.chunk(pos_ - 1) : nullptr;
        if (!next && !ended) return false;  // its time is the next chunk's
        const std::uint64_t gone_from = prev_end_.value_or(index_.head_size(sup::LogSelection::all));
        const std::uint64_t kept_at = index_.kept_start(sup::LogSelection::all);
        add_truncated(kept - 1, next ? next->time_us : before ? before->time_us : 0,
                      kept_at > gone_from ? kept_at - gone_from : 0);
        pos_ = kept;
        prev_end_ = kept_at;
        return true;
      }
      if (c->stream == sup::LogStream::marker && c->marker == sup::MarkerKind::restart) {
        // A restart policy's line between two runs: a `restart` event.
        const std::uint64_t a = index_.position(pos_, sup::LogSelection::out);
        std::string line;
        if (!masked(sup::LogStream::out, a, a + c->length, &line)) return false;  // not all in the log yet
        line.erase(std::remove(line.begin(), line.end(), '\n'), line.end());
        JsonObjectWriter w(text_);
        w.str("type", "restart").str("cursor", cursor(pos_)).str("timestamp", sup::iso_of_us(c->time_us));
        w.str("data", line);
        w.close();
        text_ += '\n';
        prev_end_ = index_.position(pos_, sup::LogSelection::all) + c->length;
        ++pos_;
        return true;
      }
      if (c->stream == sup::LogStream::marker) {  // an older build's: its count is in `dropped`
        const std::optional<sup::CommandStatus> st = status_if_ours();
        add_truncated(pos_, c->time_us, st ? st->dropped_bytes : 0);
        prev_end_ = index_.position(pos_, sup::LogSelection::all) + c->length;
        ++pos_;
        return true;
      }
      if (!ended && held(pos_)) return false;
      const std::uint64_t a = index_.position(pos_, selection(c->stream)), b = a + c->length;
      // The start of a character whose rest log_max dropped is shown as it is.
      const bool cut = gap_in(c->stream) && b == index_.head_size(selection(c->stream));
      const std::uint64_t from = a - carry(c->stream, a), to = b - (cut ? 0 : carry(c->stream, b));
      std::string data;
      if (to > from) {
        if (!masked(c->stream, from, to, &data)) return false;  // not all in the log yet
        if (!secrets_.empty()) mask_in_log_order(pos_, *c, a, from, data);
        add_data(c->stream, pos_, c->time_us, data);
      }
      prev_end_ = index_.position(pos_, sup::LogSelection::all) + c->length;
      ++pos_;
      return true;
    }
    if (!ended) return false;
    if (pos_ == n || pos_ == n + 1) {  // what a stream ended with, short of a character
      const sup::LogStream s = pos_ == n ? sup::LogStream::out : sup::LogStream::err;
      const std::uint64_t end = index_.stream_size(s), left = carry(s, end);
      std::string data;
      if (left > 0 && masked(s, end - left, end, &data)) add_data(s, pos_, last_time(s), data);
      ++pos_;
      return true;
    }
    if (pos_ == n + 2) add_terminal();
    finished_ = true;
    return pos_ == n + 2;
  }

  void add_terminal() {
    std::optional<sup::CommandStatus> st = status_if_ours();
    // The name holds another run now, or nothing: this run's end as the
    // record that replaced it keeps it, or as it was at the open; else
    // the run is gone, and no other run's state is told for it.
    if (log_owner_ != 0 && (!st || st->log_owner != log_owner_)) {
      st = fs_.sup().run_status(id_, log_owner_);
      if (st && !opened_.ours(*st)) st.reset();
      if (!st) st = opened_end_;
    }
    const bool error = !st || st->state == "error";
    JsonObjectWriter w(text_);
    w.str("type", "terminal").str("state", error ? "error" : "exited");
    w.str("cursor", cursor(index_.is_open() ? index_.end() + 2 : 2));
    w.str_or_null("timestamp", st ? st->finished_at : std::string());
    if (error) {
      std::string code = "ENOENT", message = "the record is gone";
      if (st) {
        const nlohmann::json rec = st->to_json();
        if (rec.contains("error") && rec["error"].is_object()) {
          code = rec["error"].value("code", std::string("EIO"));
          message = rec["error"].value("message", std::string());
        }
      }
      std::string e;
      JsonObjectWriter(e).str("code", code).str("message", message).close();
      w.raw("error", e);
    } else {
      std::string x;
      JsonObjectWriter ew(x);
      ew.num_or_null("code", st->exit_code ? std::optional<std::int64_t>(*st->exit_code) : std::nullopt);
      ew.str_or_null("signal", st->signal);
      ew.boolean("timedOut", st->timed_out);
      ew.close();
      w.raw("exit", x);
      w.str("endReason", st->end_reason);
    }
    w.close();
    text_ += '\n';
  }

  const std::optional<std::string> since_;
  const std::vector<std::string> secrets_;
  const std::size_t blind_;  // Supervisor::secret_blind()
  const std::optional<sup::CommandStatus> opened_end_;  // the record at the open, if its run had ended then
  std::size_t reach_ = 0;

  std::mutex mu_;
  // Guarded by mu_:
  sup::LogIndex index_;
  std::optional<sup::Error> error_;  // the cursor was refused: every read says so
  bool past_terminal_ = false;       // since= the terminal cursor of a record that never ran
  std::uint64_t first_ = 0;     // the first position to show
  std::uint64_t pos_ = 0;       // the next position to generate
  std::string text_;            // events generated, from text_base_
  std::uint64_t text_base_ = 0;
  bool finished_ = false;       // the terminal event is in text_
  std::optional<std::uint64_t> prev_end_;  // where the output was after the last chunk passed
};

}  // namespace

sup::Status check_events_keys(const FileParams& params) {
  if (const std::optional<std::string> since = params.text("since"); since && !parse_cursor(*since))
    return sup::Error{sup::Errc::invalid_argument,
                      "since=" + *since + " is not a cursor (a cursor is RUN-N, as an event's \"cursor\" gives it)"};
  return sup::Ok{};
}

std::unique_ptr<Handle> open_events(Filesystem& fs, const Node& node, const OpenRequest&) {
  return std::make_unique<EventsHandle>(fs, *node.record, node.keys().has("follow"), node.keys().text("since"));
}

}  // namespace fsd
