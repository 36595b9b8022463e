#pragma once
// The last things done through the tree (start, stop, signal, ready, mkdir,
// rmdir), for the root status.json's `steps`. Summaries are masked by the
// caller's Filesystem and cut to 200 characters; never any output.
// Thread-safe.
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

namespace fsd {

class ActivityLog {
 public:
  static constexpr std::size_t kKeep = 30;
  static constexpr std::size_t kSummaryChars = 200;

  /// Records one action; `summary` must be masked already.
  void add(std::string kind, std::string summary, std::string bg_id, std::string cwd, std::string note);
  /// Oldest first: [{at, kind, summary, bgId, cwd, note}].
  nlohmann::json to_json() const;

  /// `text` cut to at most `max` characters (UTF-8 code points), ending in "…" when cut.
  static std::string cut(std::string_view text, std::size_t max = kSummaryChars);

 private:
  struct Entry {
    std::string at, kind, summary, bg_id, cwd, note;
  };
  mutable std::mutex mu_;
  std::deque<Entry> entries_;  // guarded by mu_
};

}  // namespace fsd
