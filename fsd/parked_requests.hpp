#pragma once
// FUSE requests stored until a command ends (`wait` reads, `stop` writes) or
// becomes ready (`ready` reads). No FUSE worker ever sleeps on a supervised
// process (with every worker asleep none is left to read the INTERRUPT
// that would wake one, and the mount hangs): the handler parks the request and returns; the
// supervisor's event (ended, ready, removed), a cap timer, an interrupt or
// shutdown answers it, exactly once.
//
// Also the pollhandles of `poll()` on `wait` and `ready`: notified likewise.
// Every answer goes through send_reply().
//
// Thread-safety: all methods may be called from any thread. Answers and poll
// notifications run outside mu_ (libfuse's interrupt callback takes req->lock
// and then mu_, so nothing may reply while holding mu_). An answer due by an
// event or a cap is built on the supervisor's event thread when it is
// light, and on its worker pool when it is heavy (Cost::heavy: many
// reads of a big file), so that one big answer never delays the wake-up of
// another reader. Deciding whether a request is due reads no CPU figure.
#include <chrono>
#include <condition_variable>
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

class ReaderCondition;

class ParkedRequests {
 public:
  /// What a parked request waits for.
  enum class Until {
    ended,  ///< the command is not running (ended, or an empty slot)
    ready,  ///< the command is ready, or not running
  };
  enum class Outcome {
    ended,   ///< the command is not running
    ready,   ///< the command is (or was, before it ended) ready (Until::ready only)
    capped,  ///< the cap ran out first; the command still runs (and is not ready)
    gone,    ///< the record does not exist (any more)
  };
  /// Computes the reply for a parked request; runs once, on whichever thread answers.
  using Answer = std::function<Reply(Outcome)>;
  /// What building an answer costs: light (a small record, a short tail)
  /// or heavy (megabytes read, as for procs/ID/output).
  enum class Cost { light, heavy };

  explicit ParkedRequests(sup::Supervisor& sup);
  ~ParkedRequests();
  ParkedRequests(const ParkedRequests&) = delete;
  ParkedRequests& operator=(const ParkedRequests&) = delete;

  /// Parks `req` until `until` holds for command `id`, or `cap` passed
  /// (nullopt: no cap). Registers the interrupt callback first (EINTR at once).
  /// Answers at once when `until` holds already. After this call the caller
  /// must not touch `req`.
  ///
  /// `own` (Until::ready only): a condition of this reader alone, in place of
  /// the record's: the request is ready when `own` is met (condition_met()),
  /// and the record's ready events pass it by. It must outlive the request.
  void park(fuse_req_t req, const std::string& id, Until until,
            std::optional<std::chrono::milliseconds> cap, Answer answer, Cost cost = Cost::light,
            const ReaderCondition* own = nullptr);

  /// Keeps `ph` until `until` holds for command `id`, then notifies it.
  /// `owner` (the open file) replaces its previous pollhandle. Returns true
  /// when it holds already (the caller reports readable; `ph` has been destroyed).
  /// `own` as for park(); it must outlive the watch (unwatch() first).
  bool watch(const void* owner, const std::string& id, Until until, fuse_pollhandle* ph,
             const ReaderCondition* own = nullptr);
  /// Reader condition `own` holds: answers the requests parked on it (ready)
  /// and notifies its pollhandles. Any thread, no lock held.
  void condition_met(const ReaderCondition* own);
  /// Drops `owner`'s pollhandle (release of the open file).
  void unwatch(const void* owner);

  /// Unsubscribes, answers everything still parked with EIO and waits for
  /// the heavy answers being built. Call before the FUSE session is
  /// destroyed and the open files freed; later park() calls answer EIO at once.
  void shutdown();

 private:
  struct Parked {
    std::string id;
    Until until;
    Answer answer;
    std::uint64_t seq = 0;    // tells a stale cap timer from a later request at the same address
    std::uint64_t timer = 0;  // 0: none
    Cost cost = Cost::light;
    const ReaderCondition* own = nullptr;
  };
  struct Watch {
    std::string id;
    Until until;
    fuse_pollhandle* ph = nullptr;
    const ReaderCondition* own = nullptr;
  };

  static void on_interrupt(fuse_req_t req, void* self);
  void on_event(const sup::Event& ev);
  void on_cap(fuse_req_t req, std::uint64_t seq);
  /// Takes `req` out if it is still parked (whoever gets it answers it).
  std::optional<Parked> take(fuse_req_t req);
  /// Builds and sends the answer of a request taken out: here, or on the
  /// worker pool when it is heavy.
  void deliver(fuse_req_t req, Parked p, Outcome why);
  /// Whether `until` (with reader condition `own`, may be null) holds for
  /// `id` now; if so, *why says how.
  bool holds(const std::string& id, Until until, const ReaderCondition* own, Outcome* why) const;
  static bool holds(const std::optional<sup::CommandStatus>& st, Until until, const ReaderCondition* own,
                    Outcome* why);

  sup::Supervisor& sup_;
  std::uint64_t subscription_ = 0;

  mutable std::mutex mu_;
  std::unordered_map<fuse_req_t, Parked> parked_;        // guarded by mu_
  std::unordered_map<const void*, Watch> watches_;       // guarded by mu_
  std::uint64_t next_seq_ = 1;                           // guarded by mu_
  bool closed_ = false;                                  // guarded by mu_
  std::size_t building_ = 0;  // heavy answers on the worker pool; guarded by mu_
  std::condition_variable built_;                        // building_ went down
};

}  // namespace fsd
