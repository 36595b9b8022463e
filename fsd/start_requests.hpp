#pragma once
// The FUSE requests (a write, flush or read of `cmd`) whose answer waits
// for a start under way (Supervisor::start_async): no worker thread waits
// with them. An interrupt of such a request (Ctrl-C, `timeout`) asks its
// start to stop; the start's outcome, not the interrupt, answers the
// request: EINTR with nothing started, or (when the exec won the race) the
// start's success.
//
// Thread-safety: all methods may be called from any thread. libfuse calls
// the interrupt callback under its request lock, which then takes mu_: so
// nothing here runs a callback or replies under mu_.
#include <mutex>
#include <stop_token>
#include <unordered_map>

#include <fuse_lowlevel.h>

namespace fsd {

class StartRequests {
 public:
  StartRequests() = default;
  StartRequests(const StartRequests&) = delete;
  StartRequests& operator=(const StartRequests&) = delete;

  /// Keeps `req` until forget(req), and registers its interrupt callback,
  /// which asks `stop` (at once if the interrupt came already). Returns the
  /// token to give to start_async.
  std::stop_token add(fuse_req_t req);
  /// Call before the answer is sent (after it, req may be freed and its
  /// address reused by another request).
  void forget(fuse_req_t req);

 private:
  static void on_interrupt(fuse_req_t req, void* self);

  std::mutex mu_;
  std::unordered_map<fuse_req_t, std::stop_source> waiting_;  // guarded by mu_
};

}  // namespace fsd
