#pragma once
// Requests that wait on a command's streams: reads that follow a growing log
// (`log,follow`, `events,follow`...) and writes into a full stdin pipe. Such
// a request is stored, not slept on, and tried again at each event of its
// command (output, start, end, removal, room in its stdin) until it has
// something to answer (more bytes, EOF once the command has ended, its
// bytes all written). No FUSE worker waits: hundreds of them hold no
// thread. An interrupt answers at once (EINTR, or what the request says).
//
// Also the pollhandles of poll() on such files: notified when a try says
// the file is readable.
//
// Thread-safety: any thread. Tries and answers run outside mu_ (libfuse's
// interrupt callback takes req->lock, then mu_).
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <fuse_lowlevel.h>

#include "fsd/handle.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

class FollowRequests {
 public:
  /// The answer now, or nullopt: nothing new yet, keep waiting.
  using Attempt = std::function<std::optional<Reply>()>;
  /// Whether the file is readable now.
  using Readable = std::function<bool()>;
  /// The answer to an interrupt (a write that wrote part of its bytes says
  /// how many); empty: EINTR. Runs under the same lock as the attempts.
  using Interrupted = std::function<Reply()>;

  explicit FollowRequests(sup::Supervisor& sup);
  ~FollowRequests();
  FollowRequests(const FollowRequests&) = delete;
  FollowRequests& operator=(const FollowRequests&) = delete;

  /// Stores `req` until `attempt` answers, trying once more first (the
  /// event it waits for may have come meanwhile). After this call the
  /// caller must not touch `req`.
  void park(fuse_req_t req, const std::string& id, Attempt attempt, Interrupted interrupted = {});
  /// Keeps `ph` (replacing `owner`'s previous one) until `readable` holds at
  /// an event of `id`. True when it holds already (`ph` is then destroyed).
  bool watch(const void* owner, const std::string& id, fuse_pollhandle* ph, Readable readable);
  /// Drops `owner`'s pollhandle (release of its open file).
  void unwatch(const void* owner);
  /// Answers everything stored with EIO; later park() calls answer EIO.
  void shutdown();

 private:
  struct Parked {
    std::string id;
    Attempt attempt;
    std::uint64_t seq = 0;
    Interrupted interrupted;
  };
  struct Watch {
    std::string id;
    fuse_pollhandle* ph = nullptr;
    Readable readable;
  };

  static void on_interrupt(fuse_req_t req, void* self);
  void on_event(const sup::Event& ev);
  /// Whether a parked read or a poll still follows `id`'s output.
  bool follows(const std::string& id);
  /// Tries `req` (parked as `seq`): answers it if its attempt has an answer.
  void retry(fuse_req_t req, std::uint64_t seq);

  sup::Supervisor& sup_;
  std::uint64_t subscription_ = 0;
  std::mutex mu_;
  std::unordered_map<fuse_req_t, Parked> parked_;   // guarded by mu_
  std::unordered_map<const void*, Watch> watches_;  // guarded by mu_
  std::uint64_t next_seq_ = 1;                      // guarded by mu_
  bool closed_ = false;                             // guarded by mu_
};

}  // namespace fsd
