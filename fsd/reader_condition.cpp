#include "fsd/reader_condition.hpp"

#include "fsd/parked_requests.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

ReaderCondition::ReaderCondition(sup::Supervisor& sup, ParkedRequests& parked, const std::string& id,
                                 sup::ReadyCondition c)
    : sup_(sup), parked_(parked), cond_(std::move(c)) {
  // The callback may use `this`: the destructor cancels it before `this` goes.
  if (sup::Result<std::uint64_t> t = sup_.probe_for_reader(id, cond_, [this](const sup::ReadyMatch& m) { on_met(m); }))
    token_ = *t;
}

ReaderCondition::~ReaderCondition() {
  if (token_) sup_.cancel_probe(token_);
}

std::string ReaderCondition::met_at() const {
  std::lock_guard g(mu_);
  return match_ ? sup::iso_of_us(match_->time_us) : std::string();
}

std::optional<sup::ReadyMatch> ReaderCondition::match() const {
  std::lock_guard g(mu_);
  return match_;
}

void ReaderCondition::on_met(const sup::ReadyMatch& m) {
  {
    std::lock_guard g(mu_);
    match_ = m;
  }
  met_.store(true);
  parked_.condition_met(this);
}

}  // namespace fsd
