#pragma once
// Parameters in file names: `FILE,KEY=VALUE,KEY`, the name of a file of the
// tree, then comma-separated keys, each KEY=VALUE or a bare flag. A client
// that can only open a path (an agent's read tool) passes a read's
// parameters this way: `procs/ID/wait,timeoutSec=5,tailBytes=100`.
//
// The keys are defined here (param_keys), of which type and range; which
// file takes which keys is its row of the tree's files (tree_file.cpp):
// adding a key to a file is one key here and its name in that row. Parsing is pure
// (no FUSE, no supervisor): an unknown key, a bad value, a value out of
// range or a key given twice is invalid_argument with a message that names
// the key and says why.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "supervisor/error.hpp"

namespace fsd {

/// The directory a file with parameters is in.
enum class ParamDir { root, record };

enum class ParamType {
  flag,    ///< `KEY` alone, no value
  number,  ///< `KEY=N`: a whole number, decimal digits only, in the key's range
  text,    ///< `KEY=TEXT`: any non-empty text without a comma (a cursor)
  list,    ///< `KEY=A+B+C`: one or more non-empty items joined by '+'
};

/// Upper bounds that come from the mount's options.
struct ParamLimits {
  std::int64_t wait_timeout_sec = 600;
  std::int64_t log_max = 0;  ///< 0: no limit
};

/// One key a file takes.
struct ParamKey {
  /// Where a number's upper bound comes from.
  enum class Bound { fixed, wait_timeout, log_max };

  std::string_view name;
  ParamType type;
  std::int64_t min = 0;  ///< number: the least value
  std::int64_t max = 0;  ///< number: the greatest value, when bound is fixed
  Bound bound = Bound::fixed;

  /// The greatest value of a number under `limits`.
  std::int64_t max_under(const ParamLimits& limits) const;
};

/// The keys of the tree's files (each file's row names its set).
namespace param_keys {

/// The most bytes of log a `logTail` or `tail` shows.
inline constexpr std::int64_t kMaxTailBytes = 16384;

inline constexpr ParamKey kTimeoutSec{"timeoutSec", ParamType::number, 1, 0, ParamKey::Bound::wait_timeout};
inline constexpr ParamKey kTailBytes{"tailBytes", ParamType::number, 1, kMaxTailBytes};

inline constexpr ParamKey root_status[] = {{"all", ParamType::flag}, kTailBytes, {"fields", ParamType::list}};
inline constexpr ParamKey wait[] = {kTimeoutSec, kTailBytes};
inline constexpr ParamKey ready[] = {kTimeoutSec,
                                     kTailBytes,
                                     {"readyPort", ParamType::number, 1, 65535},
                                     {"readyLog", ParamType::text},
                                     {"readyLogStream", ParamType::text},
                                     {"readyIntervalMs", ParamType::number, 10, 3600 * 1000}};
inline constexpr ParamKey output[] = {kTimeoutSec, {"maxBytes", ParamType::number, 0, 0, ParamKey::Bound::log_max}};
inline constexpr ParamKey tail[] = {kTailBytes};
inline constexpr ParamKey record_status[] = {kTailBytes};
inline constexpr ParamKey log[] = {{"follow", ParamType::flag}, {"timestamps", ParamType::flag}};
inline constexpr ParamKey events[] = {{"since", ParamType::text}, {"follow", ParamType::flag}};
/// procs/ID/stdin (`stdin` itself is a macro of <cstdio>).
inline constexpr ParamKey stdin_file[] = {{"eof", ParamType::flag}};

/// Every set above, for the tests and the fuzzer that try them all.
inline constexpr std::span<const ParamKey> all[] = {root_status, wait, ready, output, tail, record_status, log,
                                                    events, stdin_file};

}  // namespace param_keys

/// A file of the tree that takes parameters and the keys it takes.
struct ParamFile {
  ParamDir dir;
  std::string_view name;
  std::span<const ParamKey> keys;
};

/// Every file that takes parameters (from the tree's table, tree_file.cpp).
std::span<const ParamFile> param_files();
/// The row of `file` in `dir`; null when that file takes no parameters.
const ParamFile* find_param_file(ParamDir dir, std::string_view file);

/// `name` split at its first comma into FILE and KEYS; nullopt without a comma.
std::optional<std::pair<std::string_view, std::string_view>> split_param_name(std::string_view name);

/// The keys given in one name, checked against the file's row. Values.
class FileParams {
 public:
  struct Value {
    std::string key;
    ParamType type = ParamType::flag;
    std::int64_t number = 0;          ///< number
    std::string text;                 ///< text; list: the items joined by '+'
    std::vector<std::string> items;   ///< list
  };

  bool empty() const { return values_.empty(); }
  /// The key was given (a flag: it is set).
  bool has(std::string_view key) const { return find(key) != nullptr; }
  std::optional<std::int64_t> number(std::string_view key) const;
  std::optional<std::string> text(std::string_view key) const;
  /// A list's items; empty when the key was not given.
  std::vector<std::string> items(std::string_view key) const;
  /// The keys in a canonical form: sorted by name, numbers in plain decimal
  /// (`tailBytes=10,timeoutSec=5`): equal for names that mean the same.
  const std::string& canonical() const { return canonical_; }
  /// The keys as the name gave them (for messages: the name as written).
  const std::string& given() const { return given_; }
  const std::vector<Value>& values() const { return values_; }

 private:
  friend sup::Result<FileParams> parse_file_params(std::string_view file, const ParamFile* row,
                                                   std::string_view keys, const ParamLimits& limits);
  const Value* find(std::string_view key) const;

  std::vector<Value> values_;  // sorted by key
  std::string canonical_;
  std::string given_;
};

/// Parses `keys` (what follows FILE, in `FILE,KEYS`) for file `file`, whose
/// row is `row` (null: a file of the tree that takes no parameters, so any
/// key is an error). invalid_argument with the reason on any mistake.
sup::Result<FileParams> parse_file_params(std::string_view file, const ParamFile* row, std::string_view keys,
                                          const ParamLimits& limits);

}  // namespace fsd
