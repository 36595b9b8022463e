#include "fsd/start_requests.hpp"

namespace fsd {

std::stop_token StartRequests::add(fuse_req_t req) {
  std::stop_source stop;
  {
    std::lock_guard g(mu_);
    waiting_.insert_or_assign(req, stop);
  }
  // Not under mu_: libfuse calls back under its request lock (and at once
  // when the interrupt came already), and the callback takes mu_.
  fuse_req_interrupt_func(req, &StartRequests::on_interrupt, this);
  return stop.get_token();
}

void StartRequests::forget(fuse_req_t req) {
  std::lock_guard g(mu_);
  waiting_.erase(req);
}

void StartRequests::on_interrupt(fuse_req_t req, void* self) {
  auto* me = static_cast<StartRequests*>(self);
  std::stop_source stop;
  {
    std::lock_guard g(me->mu_);
    // Not found: answered already (libfuse may call late). req is alive
    // here, so no other request can share its address.
    auto it = me->waiting_.find(req);
    if (it == me->waiting_.end()) return;
    stop = it->second;
  }
  stop.request_stop();  // the start's callback only posts: never blocks here
}

}  // namespace fsd
