#pragma once
// The lines of a log that may match any of many log conditions, found
// without running a regex over every byte: each pattern's required
// literals (RE2's FilteredRE2 atoms: a match of the pattern contains at
// least one of them) are looked for through one rare byte of each, with
// SIMD compares, and confirmed by their first bytes. Only the lines it lets
// through are given to the regexes; on output where no literal occurs this
// costs about what memchr does.
//
// It never drops a line a pattern could match: a literal is compared
// ASCII-case-insensitively, and a line with any byte >= 0x80 always passes
// (FilteredRE2 lowercases its literals with Unicode's rules, which ASCII
// folding cannot follow: the Kelvin sign folds to "k"). It may let through
// lines that match nothing (only the first 8 bytes of a literal are
// compared). Patterns without literals (`^$`, `\d+`, `.`) are no part of
// it: they are searched on every line.
//
// Thread-safety: none needed; immutable once made.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sup {

class LogWatchFilter {
 public:
  /// The literals (lowercase) of which any match of `pattern` contains one;
  /// nullopt when a match may contain none (or the pattern does not
  /// compile): such a pattern must be searched on every line.
  static std::optional<std::vector<std::string>> atoms_of(const std::string& pattern);

  /// A filter for lines holding any of `atoms` (as atoms_of gives them).
  explicit LogWatchFilter(const std::vector<std::string>& atoms);

  /// The next line of `region` (lines end at '\n', which is not part of
  /// them) from byte `*from` (a line's start) that may hold an atom;
  /// `*from` moves past it. False when there is none left.
  bool next(std::string_view region, std::size_t* from, std::string_view* line) const;

 private:
  /// Atoms whose rare byte is at `offset`; their first `len` bytes, lowercase, as keys.
  struct Bucket {
    std::size_t offset = 0;
    std::size_t len = 0;
    std::vector<std::uint64_t> keys;  // sorted
  };
  /// The first byte at or after `p` that is a rare byte or >= 0x80, or `end`.
  const char* scan(const char* p, const char* end) const;
  /// Whether an atom whose rare byte is `*p` (ASCII) may be there: its
  /// bucket's key `offset` bytes before `p`, within [begin, end).
  bool confirms(const char* begin, const char* end, const char* p) const;

  std::vector<unsigned char> needles_;             // the rare bytes, both cases of a letter
  bool is_needle_[256] = {};
  std::vector<Bucket> buckets_[128];               // per rare byte, lowercase
};

}  // namespace sup
