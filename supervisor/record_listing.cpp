#include "supervisor/record_listing.hpp"

#include <algorithm>

namespace sup {

std::vector<RecordListing::Slot>::iterator RecordListing::find(std::uint64_t serial) {
  return std::lower_bound(slots_.begin(), slots_.end(), serial,
                          [](const Slot& s, std::uint64_t n) { return s.entry.serial < n; });
}

void RecordListing::add(const std::string& id, std::uint64_t serial, uid_t owner, bool empty) {
  Slot slot{RecordEntry{id, serial, owner, empty}, true};
  // New records take new serials: at the end, as a rule.
  if (slots_.empty() || slots_.back().entry.serial < serial) {
    slots_.push_back(std::move(slot));
    ++live_;
    return;
  }
  auto it = find(serial);
  if (it != slots_.end() && it->entry.serial == serial) {
    if (!it->live) ++live_;
    *it = std::move(slot);
    return;
  }
  slots_.insert(it, std::move(slot));
  ++live_;
}

void RecordListing::remove(std::uint64_t serial) {
  auto it = find(serial);
  if (it == slots_.end() || it->entry.serial != serial || !it->live) return;
  it->live = false;
  it->entry.bg_id.clear();
  --live_;
  if (slots_.size() - live_ > std::max<std::size_t>(live_, 64)) sweep();
}

void RecordListing::sweep() {
  std::erase_if(slots_, [](const Slot& s) { return !s.live; });
}

std::vector<RecordEntry> RecordListing::entries() const {
  std::vector<RecordEntry> out;
  out.reserve(live_);
  for (const Slot& s : slots_)
    if (s.live) out.push_back(s.entry);
  return out;
}

}  // namespace sup
