#include "supervisor/retention.hpp"

#include <cstdio>
#include <ctime>

namespace sup {

void EndedRecords::add(const std::string& id, Millis finished) {
  erase(id);
  by_end_.emplace(finished, id);
  end_of_.emplace(id, finished);
}

void EndedRecords::erase(const std::string& id) {
  auto it = end_of_.find(id);
  if (it == end_of_.end()) return;
  by_end_.erase({it->second, id});
  end_of_.erase(it);
}

std::vector<std::string> EndedRecords::due(Millis now, const RetentionPolicy& policy) const {
  std::vector<std::string> out;
  std::size_t over = policy.keep > 0 && by_end_.size() > policy.keep ? by_end_.size() - policy.keep : 0;
  const Millis max_age_ms = std::chrono::duration_cast<std::chrono::milliseconds>(policy.max_age).count();
  for (const auto& [finished, id] : by_end_) {
    const bool too_old = max_age_ms > 0 && now - finished > max_age_ms;
    if (out.size() >= over && !too_old) break;  // sorted: no later one is older
    out.push_back(id);
  }
  return out;
}

std::optional<EndedRecords::Millis> EndedRecords::next_expiry(const RetentionPolicy& policy) const {
  if (policy.max_age.count() <= 0 || by_end_.empty()) return std::nullopt;
  return by_end_.begin()->first + std::chrono::duration_cast<std::chrono::milliseconds>(policy.max_age).count();
}

}  // namespace sup
