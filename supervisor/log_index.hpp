#pragma once
// The index of a record's log (supervisor/FORMAT.md, "log and index"): the
// monitor writes each byte of output once, to `log`, and appends to `index`
// one entry per chunk it read, saying which stream the bytes came from,
// where they are in `log`, and when they were read. stdout, stderr, the
// events and the timestamped views are all served from these two files.
//
// libc and the standard library only: sbxfs-monitor (a static binary)
// compiles this file too. Errors are errno values.
//
// Thread-safety: none; a LogIndex belongs to one reader.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sup {

/// What a chunk holds. The values are those stored in the file.
enum class LogStream : std::uint8_t {
  out = 1,     ///< the command's stdout
  err = 2,     ///< the command's stderr
  marker = 3,  ///< sbxfs's own line: log_max was reached (a `truncated` event), or see MarkerKind
};

/// What a marker chunk says (byte 21 of its entry; 0 in the others).
enum class MarkerKind : std::uint8_t {
  log_max = 0,  ///< log_max was reached
  restart = 1,  ///< a run ended and the restart policy runs the command again (a `restart` event)
};

/// One entry of the index: `length` bytes at `offset` of `log`.
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

/// The file's first 16 bytes: the magic and the run's id (any value that
/// differs between two runs of one slot).
std::string encode_index_header(std::uint64_t run_id);
/// One entry, 24 bytes, little-endian.
std::string encode_index_entry(const LogChunk& c);
void encode_index_entry(const LogChunk& c, char out[kIndexEntrySize]);

/// Reads `DIR/index` as it grows. A torn last entry (being written) is left
/// for the next refresh().
class LogIndex {
 public:
  LogIndex() = default;
  LogIndex(LogIndex&&) noexcept;
  LogIndex& operator=(LogIndex&&) noexcept;
  LogIndex(const LogIndex&) = delete;
  LogIndex& operator=(const LogIndex&) = delete;
  ~LogIndex();

  /// Opens DIR/index and DIR/log and reads what the index holds. 0, ENOENT
  /// (no index: a record of an older build, or no output yet), EBADMSG (not
  /// an index), or another errno.
  int open(const std::string& dir);
  bool is_open() const { return index_fd_ >= 0; }
  /// Reads the entries appended since; 0 or an errno.
  int refresh();

  std::uint64_t run_id() const { return run_id_; }
  const std::vector<LogChunk>& chunks() const { return chunks_; }
  /// The log's descriptor (read-only).
  int log_fd() const { return log_fd_; }

  /// Bytes of `stream` (out or err; a marker chunk counts in both) in the
  /// chunks read so far.
  std::uint64_t stream_size(LogStream stream) const;
  /// Up to `size` bytes of `stream` from its offset `off`, read from the log.
  /// 0 or an errno.
  int read_stream(LogStream stream, std::uint64_t off, std::size_t size, std::string* out) const;
  /// Where byte `off` of `stream` is in the log, and how many bytes of the
  /// stream follow it there contiguously (to the end of its chunk). False
  /// past the stream's end.
  bool locate(LogStream stream, std::uint64_t off, std::uint64_t* log_off, std::uint64_t* contiguous) const;
  /// Where chunk i's first byte is within its own stream (a marker chunk:
  /// within stdout).
  std::uint64_t chunk_start(std::size_t i) const { return starts_[i]; }

 private:
  struct Prefix {
    std::uint64_t start = 0;  // stream offset of the chunk's first byte
    std::size_t chunk = 0;    // its index in chunks_
  };
  const std::vector<Prefix>& prefixes(LogStream stream) const;

  int index_fd_ = -1, log_fd_ = -1;
  std::uint64_t run_id_ = 0;
  std::uint64_t read_ = 0;  // bytes of the index parsed
  std::vector<LogChunk> chunks_;
  std::vector<std::uint64_t> starts_;  // chunk_start() of each chunk
  std::vector<Prefix> out_, err_;  // chunks of each stream (markers in both)
  std::uint64_t out_size_ = 0, err_size_ = 0;
};

/// Whether chunk stream `s` belongs to the view of `view` (out or err).
inline bool in_stream(LogStream s, LogStream view) { return s == view || s == LogStream::marker; }

/// "2026-12-01T07:00:00.123Z" for a time in microseconds.
std::string iso_of_us(std::int64_t us);

/// How many bytes at the end of `bytes` are the start of a UTF-8 character
/// not complete yet (0..3): a reader that cuts there never splits one.
std::size_t incomplete_utf8_tail(std::string_view bytes);

}  // namespace sup
