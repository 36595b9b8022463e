#include "fsd/ended_lines.hpp"

#include <unordered_set>

namespace fsd {

bool EndedLines::append(std::string& out, sup::Supervisor& sup, const sup::EndedEntry& e, const Render& render,
                        const Mine& mine, const Extra& extra) {
  std::lock_guard g(mu_);
  auto it = lines_.find(e.serial);
  if (it == lines_.end() || it->second.started_at != e.started_at || it->second.finished_at != e.finished_at) {
    const std::optional<sup::CommandStatus> st = sup.status(e.bg_id, sup::CpuFigure::skip);
    if (!st || st->running || st->serial != e.serial || st->started_at != e.started_at) return false;
    Line line{e.started_at, e.finished_at, {}, {}, {}};
    line.owner.bg_id = st->bg_id;
    line.owner.owner_uid = st->owner_uid;
    line.owner.owner_sid = st->owner_sid;
    line.owner.client = st->client;
    line.owner.log_file = st->log_file;
    render(*st, line.head, line.rest);
    it = lines_.insert_or_assign(e.serial, std::move(line)).first;
  }
  const Line& l = it->second;
  out += l.head;
  out += mine(l.owner) ? "true" : "false";
  out += l.rest;
  if (extra) extra(l.owner, out);
  out += '}';
  return true;
}

void EndedLines::keep_only(const std::vector<sup::EndedEntry>& ended) {
  std::lock_guard g(mu_);
  if (lines_.size() <= ended.size()) return;
  std::unordered_set<std::uint64_t> alive;
  alive.reserve(ended.size());
  for (const sup::EndedEntry& e : ended) alive.insert(e.serial);
  std::erase_if(lines_, [&](const auto& kv) { return !alive.count(kv.first); });
}

std::size_t EndedLines::size() const {
  std::lock_guard g(mu_);
  return lines_.size();
}

}  // namespace fsd
