#include "supervisor/retention.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace sup {

void EndedRecords::add(const std::string& id, Millis finished, uid_t owner) {
  erase(id);
  by_end_.emplace(finished, id);
  by_owner_[owner].emplace(finished, id);
  end_of_.emplace(id, std::make_pair(finished, owner));
}

void EndedRecords::erase(const std::string& id) {
  auto it = end_of_.find(id);
  if (it == end_of_.end()) return;
  const auto [finished, owner] = it->second;
  by_end_.erase({finished, id});
  auto mine = by_owner_.find(owner);
  mine->second.erase({finished, id});
  if (mine->second.empty()) by_owner_.erase(mine);
  end_of_.erase(it);
}

std::vector<std::string> EndedRecords::due(Millis now, const RetentionPolicy& policy) const {
  std::vector<Entry> out;
  // Each user's records not taken yet: from the oldest on, how many.
  struct Left {
    std::set<Entry>::const_iterator next;
    std::size_t count;
  };
  std::map<uid_t, Left> left;
  for (const auto& [owner, mine] : by_owner_) left[owner] = {mine.begin(), mine.size()};
  // Every record too old, whoever's: the oldest of each user come first.
  const Millis max_age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(policy.max_age).count();
  for (const Entry& e : by_end_) {
    if (max_age_ms <= 0 || now - e.first <= max_age_ms) break;  // sorted: no later one is older
    out.push_back(e);
    Left& l = left[end_of_.at(e.second).second];
    ++l.next;
    --l.count;
  }
  // Past `keep`: the oldest of the user with the most left (of two with as
  // many, the older record).
  std::size_t over = policy.keep > 0 && by_end_.size() > policy.keep ? by_end_.size() - policy.keep : 0;
  while (out.size() < over) {
    Left* most = nullptr;
    for (auto& [owner, l] : left)
      if (l.count > 0 && (most == nullptr || l.count > most->count || (l.count == most->count && *l.next < *most->next)))
        most = &l;
    out.push_back(*most->next++);
    --most->count;
  }
  std::sort(out.begin(), out.end());
  std::vector<std::string> ids;
  ids.reserve(out.size());
  for (Entry& e : out) ids.push_back(std::move(e.second));
  return ids;
}

std::optional<EndedRecords::Millis> EndedRecords::next_expiry(const RetentionPolicy& policy) const {
  if (policy.max_age.count() <= 0 || by_end_.empty()) return std::nullopt;
  return by_end_.begin()->first + std::chrono::duration_cast<std::chrono::milliseconds>(policy.max_age).count();
}

}  // namespace sup
