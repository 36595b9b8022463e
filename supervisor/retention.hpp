#pragma once
// Which ended records the supervisor forgets, and when: the oldest ended
// first (by finishedAt, then bgId), once there are more than `keep` of them
// or once they ended more than `max_age` ago. Running commands and empty
// named slots are never in here. Not thread-safe: the Supervisor guards it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
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

  /// Adds (or moves) `id`, ended at `finished`.
  void add(const std::string& id, Millis finished);
  void erase(const std::string& id);
  std::size_t size() const { return end_of_.size(); }

  /// The ids to forget at `now` under `policy`, oldest first (still in the
  /// index: erase each once it is gone).
  std::vector<std::string> due(Millis now, const RetentionPolicy& policy) const;
  /// When the oldest record becomes too old; nullopt without an age limit or records.
  std::optional<Millis> next_expiry(const RetentionPolicy& policy) const;

 private:
  std::set<std::pair<Millis, std::string>> by_end_;
  std::unordered_map<std::string, Millis> end_of_;
};


}  // namespace sup
