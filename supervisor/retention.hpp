#pragma once
// Which ended records the supervisor forgets, and when: those that ended
// more than `max_age` ago, and past `keep` of them, the oldest (by
// finishedAt, then bgId) of the user who has the most: on a shared box
// (allow_other) one user's many commands push out their own records, not
// another user's (with one user: the oldest). Running commands and empty
// named slots are never in here. Not thread-safe: the Supervisor guards it.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sup {

struct RetentionPolicy {
  std::size_t keep = 10000;          ///< ended records kept at most; 0: no count limit
  std::chrono::seconds max_age{0};   ///< forget records ended longer ago; 0: no age limit
};

class EndedRecords {
 public:
  /// Wall-clock milliseconds since the epoch, as finishedAt says.
  using Millis = std::int64_t;

  /// Adds (or moves) `id`, ended at `finished`, of user `owner`.
  void add(const std::string& id, Millis finished, uid_t owner = 0);
  void erase(const std::string& id);
  std::size_t size() const { return end_of_.size(); }

  /// The ids to forget at `now` under `policy`, oldest first (still in the
  /// index: erase each once it is gone).
  std::vector<std::string> due(Millis now, const RetentionPolicy& policy) const;
  /// When the oldest record becomes too old; nullopt without an age limit or records.
  std::optional<Millis> next_expiry(const RetentionPolicy& policy) const;

 private:
  using Entry = std::pair<Millis, std::string>;
  std::set<Entry> by_end_;
  std::map<uid_t, std::set<Entry>> by_owner_;
  std::unordered_map<std::string, std::pair<Millis, uid_t>> end_of_;
};


}  // namespace sup
