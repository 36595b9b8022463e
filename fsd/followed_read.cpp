#include "fsd/followed_read.hpp"

#include <poll.h>

namespace fsd {

FollowedReadHandle::~FollowedReadHandle() { fs_.follows().unwatch(this); }

std::string FollowedReadHandle::dir_of(const sup::CommandStatus& st) {
  const std::size_t slash = st.log_file.rfind('/');
  return slash == std::string::npos ? std::string() : st.log_file.substr(0, slash);
}

bool FollowedReadHandle::ended() const {
  const std::optional<sup::CommandStatus> st = status_if_ours();
  return !st || st->over() || (log_owner_ != 0 && st->log_owner != log_owner_);
}

int FollowedReadHandle::open_index(sup::LogIndex& index, bool* taken) const {
  *taken = name_taken_by_another();
  if (*taken) return 0;
  const int err = index.open(dir_);
  if (err == 0 && (*taken = name_taken_by_another())) index = sup::LogIndex{};
  return *taken ? 0 : err;
}

std::optional<Reply> FollowedReadHandle::attempt(std::size_t size, off_t off) {
  // The end is looked at before the bytes: output written just before it
  // is then read, never lost to an EOF.
  const bool done = ended();
  Reply r = fetch(size, off, done);
  if (r.type() == Reply::Type::file) next_ = off + static_cast<off_t>(r.count());  // spliced: never empty
  if (r.type() != Reply::Type::data) return r;
  if (!r.bytes().empty() || !follow_ || done) {
    next_ = off + static_cast<off_t>(r.bytes().size());
    return r;
  }
  return std::nullopt;
}

Reply FollowedReadHandle::read(fuse_req_t req, std::size_t size, off_t off) {
  if (std::optional<Reply> r = attempt(size, off)) return *r;
  // The kernel sends no release while this read is unanswered: `this` outlives it.
  fs_.follows().park(req, id_, [this, size, off] { return attempt(size, off); });
  return Reply::parked();
}

bool FollowedReadHandle::readable() {
  const bool done = ended();
  return more_at(next_, done) || done;
}

Reply FollowedReadHandle::poll(fuse_req_t, fuse_pollhandle* ph, unsigned events) {
  bool ready = !follow_;  // without follow, a read never waits
  if (ready && ph) fuse_pollhandle_destroy(ph);
  if (!ready) ready = ph ? fs_.follows().watch(this, id_, ph, [this] { return readable(); }) : readable();
  return Reply::poll(ready ? (events & (POLLIN | POLLRDNORM)) : 0);
}

}  // namespace fsd
