#include "fsd/blocking_read.hpp"

#include <cerrno>
#include <poll.h>

namespace fsd {

BlockingReadHandle::~BlockingReadHandle() { fs_.parked().unwatch(this); }

std::size_t BlockingReadHandle::tail_bytes_of(const Node& node, std::size_t fallback) {
  return static_cast<std::size_t>(node.keys().number("tailBytes").value_or(static_cast<std::int64_t>(fallback)));
}

void BlockingReadHandle::cap_from(const Node& node) {
  if (const std::optional<std::int64_t> sec = node.keys().number("timeoutSec")) cap_at(std::chrono::seconds(*sec));
}

Reply BlockingReadHandle::read(fuse_req_t req, std::size_t size, off_t off) {
  {
    std::lock_guard g(mu_);
    if (answer_) return Reply::slice(*answer_, off, size);
  }
  if (name_taken_by_another()) return Reply::error(ENOENT);  // not even its end is waited for
  // The kernel sends no release while this read is unanswered, so `this`
  // outlives the parked request; once answered, the dispatcher's hold keeps
  // it alive until this handler returns.
  fs_.parked().park(
      req, id_, until_, cap_, [this, size, off](ParkedRequests::Outcome why) { return answer(why, size, off); },
      cost(), own_.get());
  return Reply::parked();
}

bool BlockingReadHandle::answer_ready() {
  {
    std::lock_guard g(mu_);
    if (answer_) return true;
  }
  const std::optional<sup::CommandStatus> st = fs_.sup().status(id_, sup::CpuFigure::skip);
  return !st || !opened_.ours(*st) || st->over() || (until_ == ParkedRequests::Until::ready && (own_ ? own_->met_for(*st) : st->ready));
}

Reply BlockingReadHandle::poll(fuse_req_t, fuse_pollhandle* ph, unsigned events) {
  bool ready;
  {
    std::lock_guard g(mu_);
    ready = answer_.has_value();
  }
  if (ready) {
    if (ph) fuse_pollhandle_destroy(ph);
  } else if (ph) {
    ready = fs_.parked().watch(this, id_, until_, ph, own_.get());
  } else {
    ready = answer_ready();
  }
  return Reply::poll(ready ? (events & (POLLIN | POLLRDNORM)) : 0);
}

Reply BlockingReadHandle::answer(ParkedRequests::Outcome why, std::size_t size, off_t off) {
  std::lock_guard g(mu_);
  if (!answer_) {
    const std::optional<sup::CommandStatus> st =
        fs_.sup().status(id_, shows_cpu() ? sup::CpuFigure::sample : sup::CpuFigure::skip);
    if (!st || why == ParkedRequests::Outcome::gone || !opened_.ours(*st)) return Reply::error(ENOENT);
    answer_ = build(*st, why);
  }
  return Reply::slice(*answer_, off, size);
}

}  // namespace fsd
