#pragma once
// The log conditions of one command, all of them (the record's and every
// reader's), matched in one pass over its new output: the bytes of each
// chunk the monitor indexed (log_index.hpp) are read once (chunks that
// follow each other in the file with one read) and searched for every
// condition at once, so 300 readers with 300 patterns cost one read and one
// scan of the output, not 300. The scan looks for the patterns' literals
// (LogWatchFilter) and gives only the lines holding one to an RE2::Set of
// those patterns; patterns without a literal go through a set over every
// line. Lines are per stream (stdout and stderr each have their own); a
// condition reads stdout, stderr or both (readyLogStream).
//
// A condition added later still sees the whole log: conditions added
// together are searched once from the start of the log, then join the
// others. A last line without a newline (a prompt) is matched while the
// command runs, when it is the end of what its stream printed so far (up to
// kMaxPromptBytes); at the end, whatever its length.
//
// Lives on the event loop's thread: every call from there. Match callbacks
// run from output()/finish() and may call remove().
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "supervisor/log_index.hpp"
#include "supervisor/ready_condition.hpp"
#include "supervisor/ready_match.hpp"

namespace sup {

inline constexpr std::size_t kMaxPromptBytes = 64 * 1024;

class LogWatch {
 public:
  using OnMatch = std::function<void(const ReadyMatch&)>;

  /// The command's record folder (its `index` and `log`), and the secrets
  /// masked in a matched line (each of their bytes a '*', as in the log's
  /// views) before it is cut: a match never shows part of one; `blind`,
  /// the global secrets' reach, masked at an unfinished line's end whatever
  /// the bytes are (secret_start_at_end).
  explicit LogWatch(std::string dir, std::vector<std::string> secrets = {}, std::size_t blind = 0);
  ~LogWatch();
  LogWatch(const LogWatch&) = delete;
  LogWatch& operator=(const LogWatch&) = delete;

  /// A log condition (c.kind == log, its regex valid); `fn` runs once, at
  /// the first line that matches. Searched at the next output() or finish().
  std::uint64_t add(const ReadyCondition& c, OnMatch fn);
  /// Drops a condition (a no-op once it matched or for an unknown token).
  void remove(std::uint64_t token);
  bool empty() const;

  void output();  ///< the log grew: the new chunks are searched
  void finish();  ///< the command ended: output(), then each stream's last line, whatever its length

 private:
  struct Entry;
  struct Group;
  struct StreamConditions;
  struct Scanner;
  struct Fired;
  void pass(bool at_end);
  /// Opens the index once there is one; false while there is nothing to read.
  bool open_index();
  /// Reads the chunks past scanner `s`'s position into it, those that follow
  /// each other in the log's data file with one read.
  void feed(Scanner& s, Fired* fired);
  std::string cursor_of(std::size_t chunk) const;
  static void fire(Fired& fired);

  const std::string dir_;
  const std::vector<std::string> secrets_;
  const std::size_t blind_;
  LogIndex index_;
  bool legacy_ = false;  // a record of a build before the index: `log` alone, as one stdout
  std::uint64_t next_token_ = 1;
  std::string buf_;  // the bytes of the chunks being read
  bool in_pass_ = false;  // a match's callback may remove() while the scanners are in use
  std::unique_ptr<Scanner> main_;   // its conditions are searched in new output only
  std::unique_ptr<Scanner> added_;  // conditions added since: searched from the start
};

/// The LogWatch of each running command that has log conditions (loop thread).
class LogWatches {
 public:
  using Lookup = std::function<std::string(const std::string&)>;
  using SecretsOf = std::function<std::vector<std::string>(const std::string&)>;
  /// `dir_of` gives a command's record folder, `secrets_of` its secrets;
  /// `blind` as for a LogWatch.
  LogWatches(Lookup dir_of, SecretsOf secrets_of, std::size_t blind)
      : dir_of_(std::move(dir_of)), secrets_of_(std::move(secrets_of)), blind_(blind) {}
  /// The watch of command `id`, made on first use.
  std::shared_ptr<LogWatch> of(const std::string& id);
  void output(const std::string& id);
  /// `id` ended: its last lines are matched and its watch is dropped.
  void finish(const std::string& id);
  void clear() { watches_.clear(); }

 private:
  Lookup dir_of_;
  SecretsOf secrets_of_;
  std::size_t blind_;
  std::map<std::string, std::shared_ptr<LogWatch>> watches_;
};

}  // namespace sup
