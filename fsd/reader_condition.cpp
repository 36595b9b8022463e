#include "fsd/reader_condition.hpp"

#include "fsd/parked_requests.hpp"
#include "supervisor/clock.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

ReaderCondition::ReaderCondition(sup::Supervisor& sup, ParkedRequests& parked, const std::string& id,
                                 sup::ReadyCondition c)
    : sup_(sup), parked_(parked), cond_(std::move(c)) {
  // The callback may use `this`: the destructor cancels it before `this` goes.
  if (sup::Result<std::uint64_t> t = sup_.probe_for_reader(id, cond_, [this] { on_met(); })) token_ = *t;
}

ReaderCondition::~ReaderCondition() {
  if (token_) sup_.cancel_probe(token_);
}

std::string ReaderCondition::met_at() const {
  std::lock_guard g(mu_);
  return met_at_;
}

void ReaderCondition::on_met() {
  {
    std::lock_guard g(mu_);
    met_at_ = sup::iso_now();
  }
  met_.store(true);
  parked_.condition_met(this);
}

}  // namespace fsd
