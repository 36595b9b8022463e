#include "fsd/parked_requests.hpp"

#include <cerrno>
#include <tuple>
#include <utility>
#include <vector>

#include "fsd/pollhandle_map.hpp"
#include "fsd/reader_condition.hpp"

namespace fsd {

ParkedRequests::ParkedRequests(sup::Supervisor& sup) : sup_(sup) {
  subscription_ = sup_.subscribe([this](const sup::Event& ev) { on_event(ev); });
}

ParkedRequests::~ParkedRequests() { shutdown(); }

void ParkedRequests::park(fuse_req_t req, const std::string& id, Until until,
                          std::optional<std::chrono::milliseconds> cap, Answer answer, Cost cost,
                          const ReaderCondition* own) {
  // Register before taking mu_: libfuse calls back under req->lock, and at
  // once (inline) if the interrupt already came; the lock order is req->lock, then mu_.
  fuse_req_interrupt_func(req, &ParkedRequests::on_interrupt, this);
  std::uint64_t seq = 0;
  {
    std::unique_lock g(mu_);
    if (closed_) {
      g.unlock();
      send_reply(req, Reply::error(EIO));  // through a route, if any
      return;
    }
    if (fuse_req_interrupted(req)) {
      g.unlock();
      send_reply(req, Reply::error(EINTR));
      return;
    }
    seq = next_seq_++;
    parked_.emplace(req, Parked{id, until, std::move(answer), seq, 0, cost, own});
  }
  // From here on another thread may answer (and free) req at any moment;
  // `seq` makes sure we only ever take back our own request.

  // It may have happened before we parked, its event already gone: look.
  Outcome why = Outcome::ended;
  if (holds(id, until, own, &why)) {
    std::optional<Parked> p;
    {
      std::lock_guard g(mu_);
      auto it = parked_.find(req);
      if (it != parked_.end() && it->second.seq == seq) {
        p = std::move(it->second);
        parked_.erase(it);
      }
    }
    if (p) send_reply(req, p->answer(why));
    return;
  }
  if (!cap) return;
  const std::uint64_t timer =
      sup_.add_timer(sup::Supervisor::Clock::now() + *cap, [this, req, seq] { on_cap(req, seq); });
  bool answered = false;
  {
    std::lock_guard g(mu_);
    auto it = parked_.find(req);
    if (it != parked_.end() && it->second.seq == seq)
      it->second.timer = timer;
    else
      answered = true;
  }
  if (answered) sup_.cancel_timer(timer);
}

void ParkedRequests::on_interrupt(fuse_req_t req, void* self) {
  auto* me = static_cast<ParkedRequests*>(self);
  // req is alive here (libfuse holds a reference), so no other live request
  // can share its address: no seq needed.
  std::optional<Parked> p = me->take(req);
  if (!p) return;  // answered by someone else, or not parked yet (park() checks again)
  send_reply(req, Reply::error(EINTR));
  if (p->timer) me->sup_.cancel_timer(p->timer);
}

void ParkedRequests::on_cap(fuse_req_t req, std::uint64_t seq) {
  std::optional<Parked> p;
  {
    std::lock_guard g(mu_);
    auto it = parked_.find(req);
    if (it == parked_.end() || it->second.seq != seq) return;
    p = std::move(it->second);
    parked_.erase(it);
  }
  // It happened just now (its event will find nothing here): say so; else capped.
  Outcome why = Outcome::capped;
  if (!holds(p->id, p->until, p->own, &why)) why = Outcome::capped;
  deliver(req, std::move(*p), why);
}

void ParkedRequests::deliver(fuse_req_t req, Parked p, Outcome why) {
  if (p.cost == Cost::light) return send_reply(req, p.answer(why));
  {
    std::lock_guard g(mu_);
    ++building_;
  }
  sup_.post_work([this, req, answer = std::move(p.answer), why] {
    send_reply(req, answer(why));
    std::lock_guard g(mu_);
    --building_;
    built_.notify_all();
  });
}

void ParkedRequests::on_event(const sup::Event& ev) {
  using K = sup::Event::Kind;
  if (ev.kind != K::ended && ev.kind != K::removed && ev.kind != K::ready) return;
  // Events are delivered asynchronously: the slot may run again by now
  // (procs/ID/cmd restarted it). Decide on the record as it is now.
  const std::optional<sup::CommandStatus> st = sup_.status(ev.bg_id, sup::CpuFigure::skip);
  Outcome why_ended = Outcome::ended, why_ready = Outcome::ended;
  const bool ended = holds(st, Until::ended, nullptr, &why_ended);
  const bool ready = holds(st, Until::ready, nullptr, &why_ready);
  if (!ended && !ready) return;
  // A reader's own condition is not the record's: only the end answers it
  // here (condition_met() answers it when it holds; the answer looks again).
  auto due_now = [&](const std::string& id, Until until, const ReaderCondition* own) {
    return id == ev.bg_id && ((until == Until::ended || own) ? ended : ready);
  };

  std::vector<std::tuple<fuse_req_t, Parked, Outcome>> due;
  std::vector<fuse_pollhandle*> polls;
  {
    std::lock_guard g(mu_);
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (due_now(it->second.id, it->second.until, it->second.own)) {
        const Outcome why = (it->second.until == Until::ended || it->second.own) ? why_ended : why_ready;
        due.emplace_back(it->first, std::move(it->second), why);
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (due_now(it->second.id, it->second.until, it->second.own)) {
        polls.push_back(it->second.ph);
        it = watches_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [req, p, why] : due) {
    if (p.timer) sup_.cancel_timer(p.timer);
    deliver(req, std::move(p), why);
  }
  // Notify from this thread, never from a handler or under a lock a handler
  // needs: the kernel may wait on that handler's reply to take the notice.
  for (fuse_pollhandle* ph : polls) {
    fuse_lowlevel_notify_poll(ph);
    fuse_pollhandle_destroy(ph);
  }
}

std::optional<ParkedRequests::Parked> ParkedRequests::take(fuse_req_t req) {
  std::lock_guard g(mu_);
  auto it = parked_.find(req);
  if (it == parked_.end()) return std::nullopt;
  Parked p = std::move(it->second);
  parked_.erase(it);
  return p;
}

bool ParkedRequests::holds(const std::string& id, Until until, const ReaderCondition* own, Outcome* why) const {
  return holds(sup_.status(id, sup::CpuFigure::skip), until, own, why);
}

bool ParkedRequests::holds(const std::optional<sup::CommandStatus>& st, Until until, const ReaderCondition* own,
                           Outcome* why) {
  if (!st) {
    *why = Outcome::gone;
    return true;
  }
  // A command that became ready and ended since was ready first.
  if (until == Until::ready && (own ? own->met_for(*st) : st->ready)) {
    *why = Outcome::ready;
    return true;
  }
  if (st->over()) {  // a queued command is not over
    *why = Outcome::ended;
    return true;
  }
  return false;
}

bool ParkedRequests::watch(const void* owner, const std::string& id, Until until, fuse_pollhandle* ph,
                           const ReaderCondition* own) {
  if (!put_pollhandle(mu_, closed_, watches_, owner, Watch{id, until, ph, own})) return true;

  Outcome why = Outcome::ended;
  if (!holds(id, until, own, &why)) return false;
  // It happened before (or while) we stored ph. If the event thread took ph it
  // notifies; otherwise we take it back. Readable either way.
  if (fuse_pollhandle* mine = take_pollhandle(mu_, watches_, owner, ph)) fuse_pollhandle_destroy(mine);
  return true;
}

void ParkedRequests::condition_met(const ReaderCondition* own) {
  std::vector<std::pair<fuse_req_t, Parked>> due;
  std::vector<fuse_pollhandle*> polls;
  {
    std::lock_guard g(mu_);
    for (auto it = parked_.begin(); it != parked_.end();) {
      if (it->second.own == own) {
        due.emplace_back(it->first, std::move(it->second));
        it = parked_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = watches_.begin(); it != watches_.end();) {
      if (it->second.own == own) {
        polls.push_back(it->second.ph);
        it = watches_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& [req, p] : due) {
    if (p.timer) sup_.cancel_timer(p.timer);
    send_reply(req, p.answer(Outcome::ready));
  }
  for (fuse_pollhandle* ph : polls) {
    fuse_lowlevel_notify_poll(ph);
    fuse_pollhandle_destroy(ph);
  }
}

void ParkedRequests::unwatch(const void* owner) {
  if (fuse_pollhandle* ph = take_pollhandle(mu_, watches_, owner)) fuse_pollhandle_destroy(ph);
}

void ParkedRequests::shutdown() {
  std::unordered_map<fuse_req_t, Parked> parked;
  std::unordered_map<const void*, Watch> watches;
  {
    std::lock_guard g(mu_);
    if (closed_) return;
    closed_ = true;
    parked.swap(parked_);
    watches.swap(watches_);
  }
  sup_.unsubscribe(subscription_);
  for (auto& [req, p] : parked) {
    if (p.timer) sup_.cancel_timer(p.timer);
    send_reply(req, Reply::error(EIO));  // through a route, if any
  }
  for (auto& [owner, w] : watches) fuse_pollhandle_destroy(w.ph);
  // Heavy answers refer to their open files: wait until they are sent.
  std::unique_lock g(mu_);
  built_.wait(g, [this] { return building_ == 0; });
}

}  // namespace fsd
