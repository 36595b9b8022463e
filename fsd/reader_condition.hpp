#pragma once
// A readiness condition of one reader alone: `procs/ID/ready,readyPort=N`
// waits for port N for this open file only. The supervisor probes it
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

#include "supervisor/ready_condition.hpp"

namespace sup {
class Supervisor;
}

namespace fsd {

class ParkedRequests;

class ReaderCondition {
 public:
  /// Starts probing `c` on command `id`. A command that is not running gets
  /// no probe: the reader's answer is that of an ended command.
  ReaderCondition(sup::Supervisor& sup, ParkedRequests& parked, const std::string& id, sup::ReadyCondition c);
  ~ReaderCondition();
  ReaderCondition(const ReaderCondition&) = delete;
  ReaderCondition& operator=(const ReaderCondition&) = delete;

  const sup::ReadyCondition& condition() const { return cond_; }
  /// The condition has held (it stays met).
  bool met() const { return met_.load(); }
  /// When it was found to hold (ISO-8601 UTC, ms); empty until met.
  std::string met_at() const;

 private:
  void on_met();  // the event thread

  sup::Supervisor& sup_;
  ParkedRequests& parked_;
  const sup::ReadyCondition cond_;
  std::atomic<bool> met_{false};
  mutable std::mutex mu_;
  std::string met_at_;     // guarded by mu_
  std::uint64_t token_ = 0;  // 0: no probe
};

}  // namespace fsd
