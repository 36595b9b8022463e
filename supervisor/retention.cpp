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

std::optional<EndedRecords::Millis> parse_iso_millis(const std::string& iso) {
  int y, mo, d, h, mi, s, ms;
  char z = 0;
  int used = 0;
  if (std::sscanf(iso.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c%n", &y, &mo, &d, &h, &mi, &s, &ms, &z, &used) != 8 ||
      z != 'Z' || static_cast<std::size_t>(used) != iso.size())
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  const std::time_t t = ::timegm(&tm);
  if (t == static_cast<std::time_t>(-1)) return std::nullopt;
  return static_cast<EndedRecords::Millis>(t) * 1000 + ms;
}

EndedRecords::Millis wall_millis_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<EndedRecords::Millis>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace sup
