#pragma once
// The index of a record's log (supervisor/FORMAT.md, "log, index and the
// tail"): the monitor writes each byte of output once and appends one entry
// per chunk it read, saying which stream the bytes came from, where they
// are, and when they were read. stdout, stderr, the events and the
// timestamped views are all served from these files.
//
// Past log_max the output is in two places: the head (`log`, `index`),
// complete once it holds half of log_max, and the tail: segments
// `tail-G` + `tail-G.index` the monitor rotates, each up to a quarter of
// log_max, dropping the oldest. Positions (in the whole log and in each
// stream) and chunk numbers count every byte and chunk since the start, the
// dropped ones too: a position or a number read once keeps its meaning.
//
// libc and the standard library only: sbxfs-monitor (a static binary)
// compiles this file too. Errors are errno values.
//
// Thread-safety: none; a LogIndex belongs to one reader.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "supervisor/unique_fd.hpp"

namespace sup {

/// What an index entry holds. The values are those stored in the file.
enum class LogStream : std::uint8_t {
  out = 1,        ///< the command's stdout
  err = 2,        ///< the command's stderr
  marker = 3,     ///< sbxfs's own line: see MarkerKind
  continued = 4,  ///< no bytes: the head is complete, the output goes on in the tail
};

/// What a marker chunk says (byte 21 of its entry; 0 in the others).
enum class MarkerKind : std::uint8_t {
  log_max = 0,  ///< an older build's: log_max was reached (a `truncated` event); only in the head
  restart = 1,  ///< a run ended and the restart policy runs the command again (a `restart` event)
};

/// Which bytes a view shows: the whole log, or one stream (an older
/// build's marker chunks are in both streams).
enum class LogSelection : std::uint8_t { all = 0, out = 1, err = 2 };

/// One entry of an index: `length` bytes at `offset` of its data file
/// (`log` for the head, `tail-G` for a tail segment).
struct LogChunk {
  std::uint64_t offset = 0;
  std::int64_t time_us = 0;  ///< CLOCK_REALTIME when the monitor read them, in microseconds
  std::uint32_t length = 0;
  LogStream stream = LogStream::out;
  MarkerKind marker = MarkerKind::log_max;  ///< of a marker chunk
};

inline constexpr char kIndexMagic[8] = {'s', 'b', 'x', 'i', 'd', 'x', '1', '\n'};
inline constexpr std::size_t kIndexHeaderSize = 16;  ///< magic, then the run id
inline constexpr std::size_t kIndexEntrySize = 24;

inline constexpr char kTailMagic[8] = {'s', 'b', 'x', 't', 'a', 'i', 'l', '2'};
inline constexpr std::size_t kTailHeaderSize = 72;
/// An older build's header: without all_before (still written by its
/// monitors, which outlive a daemon's upgrade).
inline constexpr char kTailMagicV1[8] = {'s', 'b', 'x', 't', 'a', 'i', 'l', '1'};
inline constexpr std::size_t kTailHeaderSizeV1 = 64;

/// The header of a tail segment's index: where the segment begins in the
/// whole output.
struct TailHeader {
  std::uint64_t run_id = 0;
  std::uint64_t generation = 0;   ///< G of tail-G: 1, 2, 3... (one more per segment)
  std::uint64_t head_end = 0;     ///< bytes in the head: where the tail begins
  std::uint64_t first_chunk = 0;  ///< number of the segment's first chunk
  std::uint64_t out_before = 0;   ///< stdout bytes before the segment (dropped ones too)
  std::uint64_t err_before = 0;   ///< stderr bytes before it
  std::uint64_t log_max = 0;
  /// All output before it: a marker line counts once here and in each of
  /// out_before and err_before (both streams show it). An older build's
  /// header has no such field: out_before + err_before.
  std::uint64_t all_before = 0;
  std::size_t size = kTailHeaderSize;  ///< of the header as written (decoded)
};

/// How log_max divides: the head keeps `head` bytes, each tail segment up
/// to `segment` (two are kept); an index holds at most entry_cap() entries
/// for a part of that many bytes (so it never outgrows its data much).
struct LogCaps {
  std::uint64_t head = 0, segment = 0;
};
LogCaps log_caps(std::uint64_t log_max);
std::uint64_t entry_cap(std::uint64_t part_bytes);

/// The file's first 16 bytes: the magic and the run's id (any value that
/// differs between two runs of one slot).
std::string encode_index_header(std::uint64_t run_id);
/// One entry, 24 bytes, little-endian.
std::string encode_index_entry(const LogChunk& c);
void encode_index_entry(const LogChunk& c, char out[kIndexEntrySize]);
std::string encode_tail_header(const TailHeader& h);
/// False when `p` is no whole header of ours.
bool decode_tail_header(const char* p, std::size_t n, TailHeader* h);
/// "tail-G" and "tail-G.index".
std::string tail_data_name(std::uint64_t generation);
std::string tail_index_name(std::uint64_t generation);

/// The generations of the tail segments in DIR (by their index), oldest first.
std::vector<std::uint64_t> tail_generations(const std::string& dir);
/// G when `name` is "tail-G.index", else 0.
std::uint64_t tail_generation_of(const char* name);

/// Bytes of output dropped from the record in DIR, from the oldest tail
/// segment there; nullopt when it has no tail segment.
std::optional<std::uint64_t> tail_dropped_bytes(const std::string& dir);
/// Whether the head index in DIR ends with the `continued` entry (a cheap
/// look at its last entry).
bool head_continued(const std::string& dir);

/// Reads a record's index (and its tail) as they grow. A torn last entry
/// (being written) is left for the next refresh().
class LogIndex {
 public:
  LogIndex() = default;
  LogIndex(LogIndex&&) noexcept = default;
  LogIndex& operator=(LogIndex&&) noexcept = default;
  LogIndex(const LogIndex&) = delete;
  LogIndex& operator=(const LogIndex&) = delete;

  /// Opens DIR/index and DIR/log and reads what they hold. 0, ENOENT
  /// (no index: a record of an older build, or no output yet), EBADMSG (not
  /// an index), or another errno.
  int open(const std::string& dir);
  bool is_open() const { return !parts_.empty(); }
  /// Reads what was appended since, finds new tail segments and forgets
  /// those the monitor removed; 0 or an errno.
  int refresh();
  /// DIR/index is another file now: a new run of the named slot replaced
  /// the record's folder (or it was removed). What is open is the old run's.
  bool superseded() const;

  std::uint64_t run_id() const { return run_id_; }
  /// The head's data file, `log` (read-only).
  int log_fd() const { return parts_.empty() ? -1 : parts_[0].data->get(); }
  /// The log_max the tail was written with (0 while there is no tail).
  std::uint64_t log_max() const { return log_max_; }
  /// The head is complete and the output goes on in tail segments.
  bool tail_begun() const { return tail_begun_; }

  // Chunks, by number: the head's are 0..head_chunks()-1; after them
  // [head_chunks(), kept_from()) are dropped, [kept_from(), end()) kept.
  std::uint64_t head_chunks() const;
  std::uint64_t kept_from() const;
  std::uint64_t end() const;
  /// Chunk n, or null when it was dropped or is not known yet.
  const LogChunk* chunk(std::uint64_t n) const;
  /// Where chunk n (kept) begins in `sel` (a chunk of another stream: where
  /// that stream was at the time).
  std::uint64_t position(std::uint64_t n, LogSelection sel) const;

  // Positions in a selection: the head holds [0, head_size()); after it
  // [head_size(), kept_start()) was dropped; [kept_start(), size()) is kept.
  std::uint64_t size(LogSelection sel) const;
  std::uint64_t head_size(LogSelection sel) const;
  std::uint64_t kept_start(LogSelection sel) const;
  /// Bytes of output dropped after the head.
  std::uint64_t dropped() const { return kept_start(LogSelection::all) - head_size(LogSelection::all); }

  /// Up to `size` bytes of `sel` from `off`, as far as they are kept without
  /// a break (none when `off` was dropped). 0 or an errno.
  int read(LogSelection sel, std::uint64_t off, std::size_t size, std::string* out) const;
  /// Where byte `off` of `sel` is: its data file, the offset there, and how
  /// many bytes of `sel` follow it contiguously in that file. False when it
  /// was dropped or is past the end.
  bool locate(LogSelection sel, std::uint64_t off, std::shared_ptr<const UniqueFd>* file, std::uint64_t* file_off,
              std::uint64_t* contiguous) const;

  /// The head's chunks (all of them while the tail has not begun).
  const std::vector<LogChunk>& chunks() const;
  /// size() and read() of a stream's selection (out or err).
  std::uint64_t stream_size(LogStream stream) const;
  int read_stream(LogStream stream, std::uint64_t off, std::size_t size, std::string* out) const;

 private:
  using At = std::array<std::uint64_t, 3>;  // a place in all, out, err
  struct Part {
    std::shared_ptr<const UniqueFd> data;
    UniqueFd index;
    std::uint64_t generation = 0;  // 0: the head
    std::uint64_t first = 0;       // number of its first chunk
    At start{}, end{};             // its first byte, and one past its last
    std::uint64_t parsed = 0;      // bytes of its index read
    std::vector<LogChunk> chunks;
    std::vector<At> at;            // where each chunk begins
    std::vector<std::uint32_t> of_stream[3];  // chunks of out and err (markers in both); [0] unused
  };

  int parse(Part& p);
  void discover();
  bool open_segment(std::uint64_t generation, bool* retry);
  const Part* part_of(LogSelection sel, std::uint64_t off) const;
  /// Appends to `out` up to `size` bytes of `sel` from `off`, as far as part `p` holds them.
  int read_part(const Part& p, LogSelection sel, std::uint64_t off, std::size_t size, std::string* out) const;

  std::string dir_;
  std::vector<Part> parts_;  // the head, then the tail segments kept, oldest first
  std::uint64_t run_id_ = 0, log_max_ = 0;
  std::uint64_t seen_generation_ = 0;  // the newest segment opened so far
  bool tail_begun_ = false;
};

/// Whether chunk stream `s` belongs to the view of `view` (out or err).
inline bool in_stream(LogStream s, LogStream view) { return s == view || s == LogStream::marker; }
/// Whether chunk stream `s` belongs to selection `sel`.
inline bool in_selection(LogStream s, LogSelection sel) {
  return sel == LogSelection::all || in_stream(s, sel == LogSelection::err ? LogStream::err : LogStream::out);
}

/// "2026-12-01T07:00:00.123Z" for a time in microseconds.
std::string iso_of_us(std::int64_t us);

/// How many bytes at the end of `bytes` are the start of a UTF-8 character
/// not complete yet (0..3): a reader that cuts there never splits one.
std::size_t incomplete_utf8_tail(std::string_view bytes);

}  // namespace sup
