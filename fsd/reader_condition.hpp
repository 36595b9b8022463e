#pragma once
// A readiness condition of one reader alone: one written and read back on
// the same open `ready` file, one given in its name (`ready,readyPort=N`),
// or the record's condition as it was at the reader's first read (a reader
// keeps it when the record's is replaced). The supervisor probes it
// (Supervisor::probe_for_reader) without touching the record's own
// condition (readyWhen) or its ready/readyAt; when it holds, the requests
// parked on it, and only those, are answered (ParkedRequests::condition_met).
//
// Owned by the open file that waits on it; dropping it cancels the probe,
// and once the destructor has returned no callback of it runs any more.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include <optional>

#include "supervisor/command_status.hpp"
#include "supervisor/ready_condition.hpp"
#include "supervisor/ready_match.hpp"

namespace sup {
class Supervisor;
}

namespace fsd {

class ParkedRequests;

class ReaderCondition {
 public:
  /// Starts probing `c` on command `id`. An ended command gets no probe: a
  /// log condition is searched in its whole log here (met() says whether it
  /// matched), and another kind is not met.
  ReaderCondition(sup::Supervisor& sup, ParkedRequests& parked, const std::string& id, sup::ReadyCondition c);
  ~ReaderCondition();
  ReaderCondition(const ReaderCondition&) = delete;
  ReaderCondition& operator=(const ReaderCondition&) = delete;

  const sup::ReadyCondition& condition() const { return cond_; }
  /// The condition has held (it stays met).
  bool met() const { return met_.load(); }
  /// It has held, or the record it was copied from is ready on this same
  /// condition (the record's probe found it first).
  bool met_for(const sup::CommandStatus& st) const {
    return met() || (st.ready && st.ready_cond && *st.ready_cond == cond_);
  }
  /// When it held (ISO-8601 UTC, ms: the output's own time for a log
  /// match); empty until met.
  std::string met_at() const;
  /// What matched; nullopt until met.
  std::optional<sup::ReadyMatch> match() const;

 private:
  void on_met(const sup::ReadyMatch& m);  // the event thread

  sup::Supervisor& sup_;
  ParkedRequests& parked_;
  const sup::ReadyCondition cond_;
  std::atomic<bool> met_{false};
  mutable std::mutex mu_;
  std::optional<sup::ReadyMatch> match_;  // guarded by mu_
  std::uint64_t token_ = 0;  // 0: no probe
};

}  // namespace fsd
