// procs/ID/log, stdout and stderr of a record with an index, and the views
// with parameters of log, stdout and stderr: `,follow` (a read at the end
// waits for more and gets EOF once the command has ended) and
// `,timestamps` (each line prefixed by the time its first byte was read,
// `2026-12-01T07:00:00.123Z `; its size is that text's, counted as it is
// made: stamped_lengths.hpp).
//
// The bytes are those the index (supervisor/log_index.hpp) says, in the
// head and the tail segments, through one LogView per open file
// (supervisor/log_view.hpp): past log_max, the head, a marker line where
// output was dropped, then what was kept, with offsets that stay true for
// this reader while the tail rotates. A record an older build left has no
// index but files `stdout` and `stderr` of its own: those are read, and
// its timestamped views fail with ENODATA.
//
// Secrets are masked byte for byte over a window widened by the longest
// secret on each side, so a secret split across chunks is masked whole;
// while the command runs, its last bytes that may begin a secret (one it
// writes in pieces) are not given until more comes or it ends.
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "fsd/files.hpp"
#include "fsd/followed_read.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/log_view.hpp"
#include "supervisor/secrets.hpp"

namespace fsd {

namespace {

using sup::LogSelection;

// libfuse splices a reply only when its pipe holds the bytes plus a page
// for each piece (else it copies them); a pipe grows to 1 MiB unprivileged
// (pipe-max-size), so a 512 KiB read of 64 pieces still fits.
constexpr std::size_t kMaxPieces = 64;

LogSelection selection_of(Kind k) {
  return k == Kind::stdout_log ? LogSelection::out : k == Kind::stderr_log ? LogSelection::err : LogSelection::all;
}

class StreamHandle : public FollowedReadHandle {
 public:
  /// `new_reader_size`: fstat gives the size a reader opening it now would
  /// find (a path's stat), not that of this handle's own reading.
  StreamHandle(Filesystem& fs, const sup::CommandStatus& st, LogSelection sel, bool follow, bool timestamps,
               bool new_reader_size = false)
      : FollowedReadHandle(fs, st, follow), sel_(sel), timestamps_(timestamps), new_reader_size_(new_reader_size),
        path_(sel == LogSelection::all ? st.log_file : sel == LogSelection::out ? st.stdout_file : st.stderr_file),
        view_(sel, {}) {
    take_secrets();
    // Bound now to the run it was opened on (its files stay readable
    // through what is open): a `follow` view of a slot run again before
    // its first read shows its own run, and a record removed before it
    // is still read.
    std::lock_guard g(mu_);
    (void)ensure();
  }

  bool fstat(struct stat* st) override {
    std::lock_guard g(mu_);
    if (ensure() != 0) return false;
    if (raw_) return ::fstat(raw_.get(), st) == 0;
    if (!index_.is_open() || ::fstat(index_.log_fd(), st) != 0) return false;
    if (timestamps_) {
      // Its own length, counted on as the log grows: `tail -f` and `wc -c` go
      // by it (not past what a read is not given yet).
      const std::optional<sup::CommandStatus> now = status_if_ours();
      // Output counted since dropped by log_max is not in a new reader's
      // text (a marker is): counted again from the start.
      if (new_reader_size_ && index_.tail_begun() && count_.first_after_head < index_.kept_from()) {
        count_ = StampState{};
        counted_ = 0;
      }
      Stamped count{nullptr, counted_};
      advance(count_, count, [] { return true; }, now && now->running);
      counted_ = count.length;
      st->st_size = static_cast<off_t>(counted_);
    } else {
      st->st_size = static_cast<off_t>(view_.size(index_));
    }
    st->st_blocks = (st->st_size + 511) / 512;
    return true;
  }

 protected:
  Reply fetch(std::size_t size, off_t off, bool ended) override {
    std::lock_guard g(mu_);
    if (int err = ensure()) return failure(err);
    const auto at = static_cast<std::uint64_t>(off);
    if (!raw_ && !timestamps_ && index_.is_open()) view_.live(index_, !ended);
    if (!ended && !raw_ && !timestamps_ && index_.is_open()) {
      // What may be the beginning of a secret the command is writing in
      // pieces waits for the rest (a follower is answered when it comes);
      // the timestamped text is made without it (stamped()).
      const std::uint64_t shown = view_.size(index_) - view_.held(index_);
      if (at >= shown) return Reply::data({});
      size = static_cast<std::size_t>(std::min<std::uint64_t>(size, shown - at));
    }
    std::string out;
    if (raw_) {
      if (int err = raw_masked(at, size, &out)) return failure(err);
      return Reply::data(std::move(out));
    }
    if (!index_.is_open()) return Reply::data({});
    if (timestamps_) {
      if (int err = stamped(at, size, !ended, &out)) return failure(err);
      return Reply::data(std::move(out));
    }
    // Nothing to mask and the whole read in a few places of one file (a
    // stream's chunks between the other's): the kernel moves the bytes
    // (spliced, no copy in the daemon).
    std::shared_ptr<const sup::UniqueFd> file;
    std::vector<sup::LogView::FileRange> ranges;
    if (view_.locate(index_, at, size, kMaxPieces, &file, &ranges)) {
      std::vector<Reply::Piece> pieces;
      pieces.reserve(ranges.size());
      std::size_t count = 0;
      for (const auto& r : ranges) {
        pieces.push_back({static_cast<off_t>(r.off), r.size});
        count += r.size;
      }
      // Its last byte, while the file is open: past log_max, the marker
      // shown where this reader was needs a newline of its own unless the
      // reader's last byte ended a line, and that byte may be dropped by then.
      unsigned char last = 0;
      const bool known = !ranges.empty() && ::pread(file->get(), &last, 1,
                                                   static_cast<off_t>(ranges.back().off + ranges.back().size - 1)) == 1;
      view_.served(at, count, known ? last : -1);
      return Reply::file(std::move(file), std::move(pieces));
    }
    if (int err = view_.read(index_, at, size, &out)) return failure(err);
    if (!out.empty()) view_.served(at, out.size(), static_cast<unsigned char>(out.back()));
    return Reply::data(std::move(out));
  }

  bool more_at(off_t off, bool ended) override {
    std::lock_guard g(mu_);
    if (ensure() != 0) return true;  // a read answers the error at once
    const auto at = static_cast<std::uint64_t>(off);
    if (raw_) {
      struct stat st {};
      return ::fstat(raw_.get(), &st) == 0 && at < static_cast<std::uint64_t>(st.st_size);
    }
    if (!index_.is_open()) return false;
    if (timestamps_) {
      if (at < text_base_ + text_.size()) return true;
      // The next chunk this view shows (a gap: its marker line), and whether it may be given yet.
      std::uint64_t n = read_.next_no;
      for (; n < index_.end(); ++n) {
        const sup::LogChunk* c = index_.chunk(n);
        if (!c) return n < index_.kept_from();
        if (sup::in_selection(c->stream, sel_)) break;
      }
      if (n >= index_.end()) return false;
      return ended || secrets_.empty() || !stamp_held(n, sup::stream_holds(index_, secrets_, blind_));
    }
    view_.live(index_, !ended);
    return at < view_.size(index_) - (ended ? 0 : view_.held(index_));
  }

 private:
  Reply failure(int err) const {
    if (err == ENODATA)
      return Reply::fail({sup::Errc::no_data, "this output was dropped by log_max after this reader had passed it"});
    return Reply::fail(sup::error_from_errno(err, "reading the log of " + id_));
  }

  /// Opens what the view reads, once it exists; 0 when there is nothing yet.
  int ensure() {
    if (raw_) return 0;
    if (index_.is_open() && !follow_ && index_.superseded()) rebind();
    if (index_.is_open()) {
      const int err = index_.refresh();
      if (err == 0) view_.settle(index_);
      return err;
    }
    bool taken = false;
    const int err = open_index(index_, &taken);
    if (taken) return 0;
    if (err == 0) view_.settle(index_);
    if (err == EBADMSG) return damaged_index();
    if (err != ENOENT) return err;
    // No index: an older build's record keeps its streams in files of their
    // own (a new one makes its index before its log).
    struct stat st {};
    const bool old = ::stat(path_.c_str(), &st) == 0 || ::stat((dir_ + "/log").c_str(), &st) == 0;
    if (!old || ::stat((dir_ + "/index").c_str(), &st) == 0) return 0;  // no output yet (or made just now)
    if (timestamps_) {
      if (!reported_)
        fs_.errors().add("procs/" + id_ + "/" + std::string(path_.substr(path_.rfind('/') + 1)) + ",timestamps",
                         ENODATA, "this record was written by an older sbxfs: it has no index of times", "", id_);
      reported_ = true;
      return ENODATA;
    }
    raw_.reset(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    return raw_ || errno == ENOENT ? 0 : errno;
  }

  /// A new run of the named slot replaced the record's folder: a plain view
  /// shows what the name holds now, as a file rewritten in place would (its
  /// size, which stat(2) tells, and its bytes agree). A removed record's
  /// output stays readable through what is open; a `follow` view ends with
  /// its run instead (followed_read.hpp).
  void rebind() {
    // Never another user's record of that name (made after an rmdir).
    const std::optional<sup::CommandStatus> now = fs_.sup().status(id_, sup::CpuFigure::skip);
    if (!now || !opened_.ours(*now)) return;
    sup::LogIndex next;
    bool taken = false;
    const int err = open_index(next, &taken);
    if (taken) return;
    struct stat st {};
    if (err != 0 && (err != ENOENT || ::stat(dir_.c_str(), &st) != 0)) return;
    index_ = std::move(next);  // closed when the new run has no output yet
    take_secrets();  // the new run's
    text_.clear();
    text_base_ = 0;
    read_ = StampState{};
    count_ = StampState{};
    counted_ = 0;
  }

  /// The record's secrets now (the mount's and its request's), and a view that masks them.
  void take_secrets() {
    secrets_ = fs_.sup().secrets(id_);
    blind_ = fs_.sup().secret_blind();
    reach_ = sup::secret_reach(secrets_);
    view_ = sup::LogView(sel_, secrets_, sup::LogView::Masking::bytes, blind_);
  }

  /// The index is no index (cut inside its header, overwritten), while the
  /// log is there (the monitor makes the index whole before the log): the
  /// log holds every byte in order, and is shown as it is. The streams and
  /// the times cannot be told: those views fail with EIO. Either way
  /// `errors` says why, once per open file.
  int damaged_index() {
    struct stat st {};
    if (::stat((dir_ + "/log").c_str(), &st) != 0) return errno == ENOENT ? 0 : errno;  // the index is being made
    const bool whole = sel_ == LogSelection::all && !timestamps_;
    if (whole) {
      raw_.reset(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
      if (!raw_) return errno;
    }
    const char* name = sel_ == LogSelection::all ? "log" : sel_ == LogSelection::out ? "stdout" : "stderr";
    if (!reported_)
      fs_.errors().add("procs/" + id_ + "/" + name + (timestamps_ ? ",timestamps" : ""), EIO,
                       whole ? "the record's index is damaged: its log is shown whole, without streams or times"
                             : "the record's index is damaged: its streams and times cannot be told (the log is whole)",
                       "", id_);
    reported_ = true;
    return whole ? 0 : EIO;
  }

  /// An older build's file, masked.
  int raw_masked(std::uint64_t off, std::size_t size, std::string* out) const {
    const std::uint64_t lo = off > reach_ ? off - reach_ : 0;
    const std::size_t before = static_cast<std::size_t>(off - lo);
    out->resize(before + size + (secrets_.empty() ? 0 : reach_));
    ssize_t n;
    do n = ::pread(raw_.get(), out->data(), out->size(), static_cast<off_t>(lo));
    while (n < 0 && errno == EINTR);
    if (n < 0) return errno;
    out->resize(static_cast<std::size_t>(n));
    if (!secrets_.empty()) sup::mask_secrets_in_place(*out, secrets_);
    *out = out->size() <= before ? std::string() : out->substr(before, size);
    return 0;
  }

  /// Whether chunk `n` waits while the command runs: it reaches into a
  /// beginning of a secret (`holds`), and in the whole log nothing of the
  /// other stream follows it (else it is shown, that beginning as '*').
  bool stamp_held(std::uint64_t n, const sup::StreamHolds& holds) const {
    return sup::chunk_held(index_, n, holds) && (sel_ != LogSelection::all || sup::last_of_the_streams(index_, n));
  }

  /// Bytes [lo, hi) of the selection, masked (`holds`: a running command's,
  /// as LogView::live has them); false when not all are kept yet.
  bool masked(std::uint64_t lo, std::uint64_t hi, bool after_gap, bool before_gap, const sup::StreamHolds* holds,
              std::string* out) const {
    const std::uint64_t mlo = after_gap ? lo : lo - std::min<std::uint64_t>(lo, reach_);
    std::string buf;
    if (index_.read(sel_, mlo, static_cast<std::size_t>(hi + (before_gap ? 0 : reach_) - mlo), &buf) != 0 ||
        buf.size() < hi - mlo)
      return false;
    // As the log's bytes show them, then as each stream's own do (log_view.hpp).
    std::vector<bool> apart;
    if (!secrets_.empty()) {
      if (sel_ == sup::LogSelection::all) apart = sup::secrets_of_streams(index_, mlo, buf.size(), secrets_, holds);
      sup::mask_secrets_in_place(buf, secrets_);
    }
    *out = buf.substr(static_cast<std::size_t>(lo - mlo), static_cast<std::size_t>(hi - lo));
    if (!secrets_.empty()) {
      sup::mask_covered(*out, apart, static_cast<std::size_t>(lo - mlo));
      // A secret cut by the gap: its part on either side, over chunks.
      sup::mask_gap_edges(index_, sel_, lo, *out, secrets_, blind_);
    }
    return true;
  }

  /// Where a generation of the timestamped text is in the chunks.
  struct StampState {
    std::uint64_t next_no = 0;  // the next chunk to stamp
    std::uint64_t sel_pos = 0;  // where the selection is, after what was stamped
    bool line_start = true;
    bool after_gap = false;     // a marker was just stamped
    std::uint64_t first_after_head = UINT64_MAX;  // the first chunk stamped past the head
  };
  /// Where the text goes: kept in `text` (when given), counted in `length`.
  struct Stamped {
    std::string* text;
    std::uint64_t length;
    void add(std::string_view bytes) {
      if (text) text->append(bytes);
      length += bytes.size();
    }
  };

  /// Adds `bytes`, each line prefixed by `stamp`.
  static void append_stamped(StampState& s, Stamped& out, const std::string& stamp, std::string_view bytes) {
    for (std::size_t i = 0; i < bytes.size();) {
      if (s.line_start) out.add(stamp);
      const void* nl = std::memchr(bytes.data() + i, '\n', bytes.size() - i);
      const std::size_t end = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - bytes.data()) + 1 : bytes.size();
      out.add(bytes.substr(i, end - i));
      s.line_start = nl != nullptr;
      i = end;
    }
  }

  /// Stamps the chunks after `s` into `out` while `more()` and they are
  /// known; with `hold`, not from one that may begin a secret (chunk_held).
  template <class More>
  void advance(StampState& s, Stamped& out, More more, bool hold) {
    std::optional<sup::StreamHolds> holds;
    if (hold && !secrets_.empty()) holds = sup::stream_holds(index_, secrets_, blind_);
    while (more() && s.next_no < index_.end()) {
      const sup::LogChunk* c = index_.chunk(s.next_no);
      if (!c) {
        if (s.next_no >= index_.kept_from()) break;  // not known yet
        // Dropped by log_max: a marker line where this selection lost bytes.
        const std::uint64_t kept = index_.kept_start(sel_);
        if (kept > s.sel_pos) {
          const sup::LogChunk* next = index_.chunk(index_.kept_from());
          if (!s.line_start) out.add("\n");
          s.line_start = true;
          append_stamped(s, out, sup::iso_of_us(next ? next->time_us : 0) + " ", sup::log_marker_line(index_.log_max()));
          s.after_gap = true;
        }
        s.next_no = index_.kept_from();
        s.sel_pos = std::max(s.sel_pos, kept);
        continue;
      }
      if (!sup::in_selection(c->stream, sel_)) {
        ++s.next_no;
        continue;
      }
      if (holds && stamp_held(s.next_no, *holds)) break;
      const std::uint64_t at = index_.position(s.next_no, sel_), to = at + c->length;
      const bool before_gap = index_.tail_begun() && to == index_.head_size(sel_) && index_.kept_start(sel_) > to;
      std::string bytes;
      if (!masked(at, to, s.after_gap, before_gap, holds ? &*holds : nullptr, &bytes)) break;  // not all in the log yet
      append_stamped(s, out, sup::iso_of_us(c->time_us) + " ", bytes);
      if (s.first_after_head == UINT64_MAX && index_.tail_begun() && s.next_no >= index_.head_chunks())
        s.first_after_head = s.next_no;
      s.after_gap = false;
      s.sel_pos = to;
      ++s.next_no;
    }
  }

  /// The timestamped text at [off, off+size), generated from the chunks
  /// (again from the start when a reader goes back).
  int stamped(std::uint64_t off, std::size_t size, bool hold, std::string* out) {
    out->clear();
    if (off < text_base_) {
      text_.clear();
      text_base_ = 0;
      read_ = StampState{};
    }
    Stamped sink{&text_, 0};
    advance(read_, sink, [&] {
      // What the reader has passed is dropped: a long log never sits in memory.
      if (off > text_base_) {
        const std::size_t drop = std::min<std::uint64_t>(off - text_base_, text_.size());
        text_.erase(0, drop);
        text_base_ += drop;
      }
      return text_base_ + text_.size() < off + size;
    }, hold);
    if (off >= text_base_ && off < text_base_ + text_.size())
      *out = text_.substr(static_cast<std::size_t>(off - text_base_), size);
    return 0;
  }

  const LogSelection sel_;
  const bool timestamps_;
  const bool new_reader_size_;  // fstat: a new reader's size (a path's stat), not this reading's
  const std::string path_;

  std::mutex mu_;
  // Guarded by mu_ (all but those set in the constructor):
  std::vector<std::string> secrets_;  // of the run it shows
  std::size_t blind_ = 0;             // Supervisor::secret_blind()
  std::size_t reach_ = 0;             // the longest secret - 1
  sup::LogIndex index_;
  sup::LogView view_;
  sup::UniqueFd raw_;  // the file read without an index (an older build's record)
  bool reported_ = false;
  std::string text_;            // timestamped text from text_base_
  std::uint64_t text_base_ = 0;
  StampState read_;             // the reader's text: how far it was made
  StampState count_;            // its length (fstat): how far it was counted
  std::uint64_t counted_ = 0;
};

}  // namespace

bool has_index(const sup::CommandStatus& st) {
  struct stat s {};
  return ::stat((FollowedReadHandle::dir_of(st) + "/index").c_str(), &s) == 0;
}

std::unique_ptr<Handle> open_stream(Filesystem& fs, const Node& node, const OpenRequest&) {
  return std::make_unique<StreamHandle>(fs, *node.record, selection_of(node.kind), node.keys().has("follow"),
                                        node.keys().has("timestamps"));
}

bool stream_attr(Filesystem& fs, const Node& node, struct stat* st) {
  const LogSelection sel = selection_of(node.kind);
  const std::string dir = FollowedReadHandle::dir_of(*node.record);
  // The log itself is its file until the tail begins (a cheap look first).
  if (sel == LogSelection::all && !sup::head_continued(dir) && !node.keys().has("timestamps")) return false;
  if (node.keys().has("timestamps")) {
    const sup::CommandStatus& rec = *node.record;
    const std::string key = dir + "/" + std::to_string(static_cast<int>(sel)) + "/" + std::to_string(rec.log_owner);
    return fs.stamped_lengths().attr(
        key, [&] { return std::make_unique<StreamHandle>(fs, rec, sel, false, true, true); }, st);
  }
  sup::LogIndex index;
  if (const int err = index.open(dir); err == EBADMSG) {
    // A damaged index (damaged_index()): the log's size, so that a read
    // comes and says what is wrong, never an empty file.
    return ::stat((dir + "/log").c_str(), st) == 0;
  } else if (err != 0 || ::fstat(index.log_fd(), st) != 0) {
    return false;
  }
  sup::LogView view(sel, {});
  view.settle(index);
  st->st_size = static_cast<off_t>(view.size(index));
  st->st_blocks = (st->st_size + 511) / 512;
  return true;
}

}  // namespace fsd
