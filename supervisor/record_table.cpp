// The supervisor's table of records: the one place records enter and leave
// it, so that what list_running() walks (LiveRecords) and what a listing
// shows (RecordListing) stay exact.
#include "supervisor/supervisor_impl.hpp"

namespace sup {

std::map<std::string, Record>::iterator Supervisor::Impl::put_record(const std::string& id, Record&& r,
                                                                     std::optional<Record>* replaced) {
  if (auto old = records.find(id); old != records.end()) {
    live.leaving(old);
    listing.remove(old->second.serial);
    if (replaced) *replaced = std::move(old->second);
  }
  auto [it, _] = records.insert_or_assign(id, std::move(r));
  live.entered(it);
  // Constant while it is in the table, as LiveRecords assumes: only a new
  // record in its place turns an empty slot into a run.
  listing.add(it->first, it->second.serial, it->second.owner_uid, shown_state(it->second) == CommandState::empty);
  return it;
}

void Supervisor::Impl::drop_record(std::map<std::string, Record>::iterator it) {
  live.leaving(it);
  listing.remove(it->second.serial);
  records.erase(it);
}

}  // namespace sup
