#include "supervisor/live_records.hpp"

namespace sup {

void LiveRecords::entered(Table::iterator it) {
  it->second.settled = Settled::no;  // whatever it carried in: every record enters unsettled
  unsettled_.insert_or_assign(std::string_view(it->first), it);
}

void LiveRecords::leaving(Table::iterator it) {
  Record& r = it->second;
  if (r.settled == Settled::no) {
    unsettled_.erase(std::string_view(it->first));
    return;
  }
  if (r.settled == Settled::ended) {
    --ended_;
    if (--ended_by_uid_[r.owner_uid] == 0) ended_by_uid_.erase(r.owner_uid);
  }
  r.settled = Settled::no;
}

void LiveRecords::settle(Record& r, CommandState shown) {
  if (shown == CommandState::empty) {
    r.settled = Settled::empty;
    return;
  }
  r.settled = Settled::ended;
  ++ended_;
  ++ended_by_uid_[r.owner_uid];
}

}  // namespace sup
