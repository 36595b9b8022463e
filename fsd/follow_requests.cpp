#include "fsd/follow_requests.hpp"

#include <cerrno>
#include <utility>
#include <vector>

#include "fsd/pollhandle_map.hpp"

namespace fsd {

FollowRequests::FollowRequests(sup::Supervisor& sup) : sup_(sup) {
  subscription_ = sup_.subscribe([this](const sup::Event& ev) { on_event(ev); },
                                 [this](const std::string& id) { return follows(id); });
}

FollowRequests::~FollowRequests() { shutdown(); }

void FollowRequests::park(fuse_req_t req, const std::string& id, Attempt attempt, Interrupted interrupted) {
  // Registered before taking mu_: libfuse calls back under req->lock, and
  // at once when the interrupt came already.
  fuse_req_interrupt_func(req, &FollowRequests::on_interrupt, this);
  std::uint64_t seq = 0;
  {
    std::unique_lock g(mu_);
    if (closed_ || fuse_req_interrupted(req)) {
      const Reply r = closed_ ? Reply::error(EIO) : interrupted ? interrupted() : Reply::error(EINTR);
      g.unlock();
      send_reply(req, r);
      return;
    }
    seq = next_seq_++;
    parked_.emplace(req, Parked{id, std::move(attempt), seq, std::move(interrupted)});
  }
  sup_.want_output(id);  // known to follows() first (supervisor.hpp, subscribe)
  retry(req, seq);  // the output may have come before we were stored
}

void FollowRequests::retry(fuse_req_t req, std::uint64_t seq) {
  std::optional<Reply> r;
  {
    // Under mu_: an interrupt answered meanwhile could let the kernel
    // release the open file the attempt reads (the interrupt waits here;
    // an attempt takes no lock of libfuse's).
    std::lock_guard g(mu_);
    auto it = parked_.find(req);
    if (it == parked_.end() || it->second.seq != seq) return;
    r = it->second.attempt();
    if (!r) return;
    parked_.erase(it);
  }
  send_reply(req, *r);
}

void FollowRequests::on_interrupt(fuse_req_t req, void* self) {
  auto* me = static_cast<FollowRequests*>(self);
  Reply r = Reply::error(EINTR);
  {
    std::lock_guard g(me->mu_);
    auto it = me->parked_.find(req);
    if (it == me->parked_.end()) return;  // answered already, or not parked yet (park() looks)
    if (it->second.interrupted) r = it->second.interrupted();
    me->parked_.erase(it);
  }
  send_reply(req, r);
}

void FollowRequests::on_event(const sup::Event& ev) {
  std::vector<std::pair<fuse_req_t, std::uint64_t>> due;
  std::vector<fuse_pollhandle*> polls;
  {
    // readable() under mu_: unwatch() (the release of the open file) waits for it.
    std::lock_guard g(mu_);
    for (const auto& [req, p] : parked_)
      if (p.id == ev.bg_id) due.emplace_back(req, p.seq);
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (it->second.id == ev.bg_id && it->second.readable()) {
        polls.push_back(it->second.ph);
        it = watches_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [req, seq] : due) retry(req, seq);
  // From the event thread, never a handler, and under no lock.
  for (fuse_pollhandle* ph : polls) {
    fuse_lowlevel_notify_poll(ph);
    fuse_pollhandle_destroy(ph);
  }
}

bool FollowRequests::follows(const std::string& id) {
  std::lock_guard g(mu_);
  for (const auto& [req, p] : parked_)
    if (p.id == id) return true;
  for (const auto& [owner, w] : watches_)
    if (w.id == id) return true;
  return false;
}

bool FollowRequests::watch(const void* owner, const std::string& id, fuse_pollhandle* ph, Readable readable) {
  if (!put_pollhandle(mu_, closed_, watches_, owner, Watch{id, ph, readable})) return true;
  sup_.want_output(id);
  if (!readable()) return false;
  // Readable already: take it back, unless the event thread took it (then it notifies).
  if (fuse_pollhandle* mine = take_pollhandle(mu_, watches_, owner, ph)) fuse_pollhandle_destroy(mine);
  return true;
}

void FollowRequests::unwatch(const void* owner) {
  if (fuse_pollhandle* ph = take_pollhandle(mu_, watches_, owner)) fuse_pollhandle_destroy(ph);
}

void FollowRequests::shutdown() {
  std::unique_lock g(mu_);
  if (std::exchange(closed_, true)) return;
  auto parked = std::exchange(parked_, {});
  auto watches = std::exchange(watches_, {});
  g.unlock();
  sup_.unsubscribe(subscription_);
  for (auto& [req, p] : parked) send_reply(req, Reply::error(EIO));
  for (auto& [owner, w] : watches) fuse_pollhandle_destroy(w.ph);
}

}  // namespace fsd
