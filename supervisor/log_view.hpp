#pragma once
// What one open file shows of a log (all of it, or one stream) once
// log_max has dropped output: the head, the marker line, then the output
// kept after it (log_index.hpp). The offsets this reader was given keep
// their meaning while the tail rotates: output dropped before the reader
// got to it becomes a marker line at the point it had reached, so a reader
// that keeps up (a follower at the end) never sees a marker, and one that
// falls behind sees one marker per gap, never bytes out of place.
//
// Secrets are masked byte for byte over a window widened by the longest
// secret on each side, in the whole log and, for the whole log, in each
// stream's own bytes too (a secret written in pieces with the other
// stream's output between them); at a gap, a secret's part on either side
// is masked too (its other part is gone).
//
// Thread-safety: none; a LogView belongs to one reader, beside its LogIndex.
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "supervisor/log_index.hpp"

namespace sup {

/// "[sbxfs: log_max (N bytes) reached: ...]\n", the line where output was dropped.
std::string log_marker_line(std::uint64_t log_max);

/// Per stream ([0] stdout, [1] stderr): where its last bytes that may begin a secret begin (stream_hold).
using StreamHolds = std::array<std::uint64_t, 2>;

class LogView {
 public:
  /// How secrets are masked: each byte of one ('*'), or only the parts cut
  /// by a gap, for a caller that masks whole ones itself ("****").
  enum class Masking { bytes, cut_parts };
  /// `blind`: the global secrets' reach, held or masked at a cut whatever
  /// the bytes are (secret_start_at_end).
  LogView(LogSelection sel, std::vector<std::string> secrets, Masking masking = Masking::bytes, std::size_t blind = 0);

  /// Takes in what `index` holds now (after each refresh): a gap that has
  /// opened before the bytes this reader is at becomes a marker.
  void settle(const LogIndex& index);
  /// The view's size now (after settle()).
  std::uint64_t size(const LogIndex& index) const;
  /// How many of the view's last bytes are held back from a reader while
  /// the command runs: from the beginning of a secret it may be writing in
  /// pieces (hold_from), shown once it writes on or ends.
  std::uint64_t held(const LogIndex& index) const;
  /// Whether the command runs (before held() and read()): then, in the
  /// whole log, a stream's beginning of a secret followed by the other
  /// stream's output reads as '*' (hold_from).
  void live(const LogIndex& index, bool running);
  /// Whether the view has a marker (output was dropped from it).
  bool has_gap() const { return pieces_.size() > 1; }
  /// Bytes [off, off+size) as far as they are there now (fewer at the end,
  /// none past it), masked. ENODATA when they were dropped after this
  /// reader had passed them (only a reader that goes back meets that).
  int read(const LogIndex& index, std::uint64_t off, std::size_t size, std::string* out);
  /// A range of bytes of one file.
  struct FileRange {
    std::uint64_t off = 0;
    std::size_t size = 0;
  };
  /// Where [off, off+size) is, unmasked, for a reply sent without a copy:
  /// at most `max_ranges` ranges of one file (a stream's chunks lie between
  /// the other stream's), in order. False when the bytes are masked, cross
  /// a marker or another file, need more ranges, or end short of `size`
  /// before the view's end (tools take a short read for the end of a
  /// regular file). Call served() with what is sent.
  bool locate(const LogIndex& index, std::uint64_t off, std::size_t size, std::size_t max_ranges,
              std::shared_ptr<const UniqueFd>* file, std::vector<FileRange>* ranges) const;
  /// The reader was given [off, off+n), whose last byte is `last`.
  /// `last`: -1 when not known.
  void served(std::uint64_t off, std::uint64_t n, int last = -1);

 private:
  struct Piece {
    std::uint64_t view = 0;  // where it begins in the view
    std::uint64_t pos = 0;   // a data piece: where in the selection (it runs to the next piece)
    std::string marker;      // a marker piece: its text
  };
  std::size_t piece_at(std::uint64_t off) const;
  std::uint64_t piece_end(std::size_t i) const;

  LogSelection sel_;  // not const: a view is replaced by assignment (a new run)
  Masking masking_;
  std::vector<std::string> secrets_;  // the non-empty ones
  std::size_t reach_ = 0;  // longest secret - 1
  std::size_t blind_ = 0;  // the global secrets' reach (secret_start_at_end)
  std::vector<Piece> pieces_;
  std::optional<StreamHolds> holds_;  // live(): the streams' holds while the command runs
  std::uint64_t served_ = 0;  // how far this reader was given bytes
  int last_ = '\n';           // the last of them (-1: not known)
};

/// Where the last bytes of stream `s` begin that may be the beginning of a
/// secret the command is writing in pieces (secret_start_at_end), as a
/// position in that stream; its size when there are none. While the
/// command runs a reader is not given them until more comes or it ends.
std::uint64_t stream_hold(const LogIndex& index, LogStream s, const std::vector<std::string>& secrets,
                          std::size_t blind);
/// stream_hold of stdout and stderr.
StreamHolds stream_holds(const LogIndex& index, const std::vector<std::string>& secrets, std::size_t blind);
/// Whether kept chunk `n` (of stdout or stderr) reaches into those last
/// bytes of its stream: a running command's reader is not given it yet.
bool chunk_held(const LogIndex& index, std::uint64_t n, const StreamHolds& holds);
bool chunk_held(const LogIndex& index, std::uint64_t n, const std::vector<std::string>& secrets, std::size_t blind);
/// Whether no chunk of the other stream follows chunk `n` (of stdout or stderr).
bool last_of_the_streams(const LogIndex& index, std::uint64_t n);
/// The same as a position in `sel`. For the whole log only where nothing of
/// the other stream follows them (at the end of the log): followed by it,
/// they are shown as '*' instead (LogView::live), so that the other
/// stream's output never waits on a beginning that may not go on.
std::uint64_t hold_from(const LogIndex& index, LogSelection sel, const StreamHolds& holds);

/// Of the `n` bytes [lo, lo+n) of the whole log, those that belong to
/// secrets that one stream wrote in pieces with the other stream's output
/// between them, which the log's own bytes do not show whole (each
/// stream's own bytes there, with the longest secret's length more of them
/// on each side, masked). Empty when none (or one stream alone is there).
/// With `holds`, also the bytes of each stream from its hold on (a running
/// command's beginning of a secret, shown as '*' in the whole log).
std::vector<bool> secrets_of_streams(const LogIndex& index, std::uint64_t lo, std::size_t n,
                                     const std::vector<std::string>& secrets, const StreamHolds* holds = nullptr);
/// Sets to '*' each byte of `bytes` whose place, counted from `from` in
/// `covered`, is covered.
void mask_covered(std::string& bytes, const std::vector<bool>& covered, std::size_t from);

/// Masks the parts of secrets cut by a gap: the first bytes of `bytes`
/// that end a secret (`after_gap`), its last ones that begin one (`before_gap`),
/// and at least `blind` of them within their line (secret_part_at_cut).
void mask_secret_parts(std::string& bytes, const std::vector<std::string>& secrets, bool after_gap, bool before_gap,
                       std::size_t blind);

/// Masks in `bytes`, bytes [lo, lo + size) of `sel` of `index`, the parts
/// of secrets that log_max's gap cut, found over the gap's whole edge: the
/// part of a secret that ends the kept bytes' first line, and the part that
/// begins the head's last, as mask_secret_parts() finds them in all the
/// bytes within reach of the gap, whatever part of them `bytes` holds (a
/// view that reads a chunk at a time would miss a part cut across chunks).
void mask_gap_edges(const LogIndex& index, LogSelection sel, std::uint64_t lo, std::string& bytes,
                    const std::vector<std::string>& secrets, std::size_t blind);

/// The last `bytes` bytes of the view of `sel` of the record in DIR as a
/// new reader sees it, masked as `masking` says, without what a running
/// command's reader is not given yet (`running`: LogView::held); `size`
/// gets the view's size and `gap` whether output was dropped from it.
/// Nullopt without an index (an older build's record).
std::optional<std::string> log_view_end(const std::string& dir, LogSelection sel, std::size_t bytes,
                                        const std::vector<std::string>& secrets, std::size_t blind, bool running,
                                        LogView::Masking masking = LogView::Masking::bytes,
                                        std::uint64_t* size = nullptr, bool* gap = nullptr);

}  // namespace sup
