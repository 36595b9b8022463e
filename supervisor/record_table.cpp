// The supervisor's table of records: the one place records enter and leave
// it, so that what list_running() walks (LiveRecords) stays exact.
#include "supervisor/supervisor_impl.hpp"

namespace sup {

std::map<std::string, Record>::iterator Supervisor::Impl::put_record(const std::string& id, Record&& r,
                                                                     std::optional<Record>* replaced) {
  if (auto old = records.find(id); old != records.end()) {
    live.leaving(old);
    if (replaced) *replaced = std::move(old->second);
  }
  auto [it, _] = records.insert_or_assign(id, std::move(r));
  live.entered(it);
  return it;
}

void Supervisor::Impl::drop_record(std::map<std::string, Record>::iterator it) {
  live.leaving(it);
  records.erase(it);
}

}  // namespace sup
