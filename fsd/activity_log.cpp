#include "fsd/activity_log.hpp"

#include "supervisor/clock.hpp"

namespace fsd {

std::string ActivityLog::cut(std::string_view text, std::size_t max) {
  // Code points are counted by their lead bytes; a cut never splits one.
  std::size_t chars = 0;
  std::size_t i = 0;
  std::size_t cut_at = std::string_view::npos;
  for (; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (chars == max - 1) cut_at = i;  // where "…" would go
    if (++chars > max) break;
  }
  if (chars <= max) return std::string(text);
  return std::string(text.substr(0, cut_at)) + "\u2026";
}

void ActivityLog::add(std::string kind, std::string summary, std::string bg_id, std::string cwd,
                      std::string note) {
  Entry e{sup::iso_now(), std::move(kind), cut(summary), std::move(bg_id), std::move(cwd), cut(note)};
  std::lock_guard g(mu_);
  entries_.push_back(std::move(e));
  while (entries_.size() > kKeep) entries_.pop_front();
}

nlohmann::json ActivityLog::to_json() const {
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard g(mu_);
  for (const Entry& e : entries_)
    out.push_back({{"at", e.at},
                   {"kind", e.kind},
                   {"summary", e.summary},
                   {"bgId", e.bg_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.bg_id)},
                   {"cwd", e.cwd.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.cwd)},
                   {"note", e.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.note)}});
  return out;
}

}  // namespace fsd
