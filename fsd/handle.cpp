#include "fsd/handle.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <mutex>
#include <new>
#include <poll.h>
#include <unordered_map>
#include <vector>
#include <sys/stat.h>

#include "fsd/errno_map.hpp"

namespace fsd {

int Reply::err() const { return code_ ? to_errno(*code_) : err_; }

Reply Reply::slice(std::string_view bytes, off_t off, std::size_t size) {
  if (off < 0 || static_cast<std::size_t>(off) >= bytes.size()) return data({});
  return data(std::string(bytes.substr(static_cast<std::size_t>(off), size)));
}

namespace {

std::mutex g_routes_mu;
std::unordered_map<fuse_req_t, ReplyRoute> g_routes;  // guarded by g_routes_mu

}  // namespace

void route_replies(fuse_req_t req, ReplyRoute next) {
  std::lock_guard g(g_routes_mu);
  g_routes.insert_or_assign(req, std::move(next));
}

void send_reply(fuse_req_t req, const Reply& r) {
  if (r.type() == Reply::Type::parked) return;
  ReplyRoute route;
  {
    std::lock_guard g(g_routes_mu);
    if (auto it = g_routes.find(req); it != g_routes.end()) {
      route = std::move(it->second);
      g_routes.erase(it);
    }
  }
  if (route) return route(r);  // outside the lock: it may route again and call on
  switch (r.type()) {
    case Reply::Type::error: fuse_reply_err(req, r.err()); break;
    case Reply::Type::data: fuse_reply_buf(req, r.bytes().data(), r.bytes().size()); break;
    case Reply::Type::file: {
      // fuse_bufvec ends in an array of one: it is made (placement, in storage
      // owned here) with room for every piece after it.
      const std::vector<Reply::Piece>& pieces = r.pieces();
      const std::size_t n = std::max<std::size_t>(pieces.size(), 1);
      std::vector<std::max_align_t> room((sizeof(fuse_bufvec) + (n - 1) * sizeof(fuse_buf) + sizeof(std::max_align_t) - 1) /
                                         sizeof(std::max_align_t));
      auto* bv = new (room.data()) fuse_bufvec(FUSE_BUFVEC_INIT(0));
      bv->count = pieces.size();
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        fuse_buf& b = bv->buf[i];
        b = fuse_buf{};
        b.size = pieces[i].size;
        b.flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK | FUSE_BUF_FD_RETRY);
        b.fd = r.fd();
        b.pos = pieces[i].off;
      }
      if (pieces.empty()) bv->buf[0].size = 0;
      fuse_reply_data(req, bv, static_cast<fuse_buf_copy_flags>(0));
      break;
    }
    case Reply::Type::written: fuse_reply_write(req, r.count()); break;
    case Reply::Type::poll: fuse_reply_poll(req, static_cast<unsigned>(r.count())); break;
    case Reply::Type::parked: break;
  }
}

Reply Handle::read(fuse_req_t, std::size_t, off_t) { return Reply::error(EBADF); }
Reply Handle::write(fuse_req_t, std::string_view, off_t) { return Reply::error(EBADF); }
Reply Handle::flush(fuse_req_t) { return Reply::error(0); }
Reply Handle::release(fuse_req_t) { return Reply::error(0); }
bool Handle::fstat(struct stat*) { return false; }

Reply Handle::poll(fuse_req_t, fuse_pollhandle* ph, unsigned events) {
  if (ph) fuse_pollhandle_destroy(ph);
  return Reply::poll(events & (POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM));
}

}  // namespace fsd
