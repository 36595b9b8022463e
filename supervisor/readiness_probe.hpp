#pragma once
// Checks one command's ready condition on the event loop, without burning
// CPU: a log condition is one of the command's LogWatch (which reads each
// new byte once for all its conditions); port and http probes connect
// without blocking and back off from 50 ms to 1 s between tries (or try at
// the condition's fixed interval); a notify condition (readyFd) holds once
// the monitor has written `notified` in the record's folder.
//
// Lives on the loop thread: create, feed and cancel it only from there.
// Callbacks hold a weak_ptr, so a probe may be dropped at any time.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "supervisor/event_loop.hpp"
#include "supervisor/log_watch.hpp"
#include "supervisor/ready_condition.hpp"
#include "supervisor/ready_match.hpp"
#include "supervisor/unique_fd.hpp"

namespace sup {

class ReadinessProbe : public std::enable_shared_from_this<ReadinessProbe> {
 public:
  using OnReady = std::function<void(const ReadyMatch&)>;

  /// Starts probing; `on_ready` runs once, on the loop thread, with what
  /// matched. `dir` is the record's folder; `log` the command's LogWatch
  /// (used by a log condition only).
  static std::shared_ptr<ReadinessProbe> start(EventLoop& loop, const ReadyCondition& c, std::string dir,
                                               std::shared_ptr<LogWatch> log, OnReady on_ready);
  ~ReadinessProbe();

  void output();  ///< the folder changed (a notify condition looks for `notified`)
  void finish();  ///< the command ended: stop probing (its LogWatch matches a last line itself)
  void cancel();  ///< stop everything; on_ready will not run

  ReadinessProbe(EventLoop& loop, ReadyCondition c, std::string dir, OnReady on_ready);

 private:
  void attempt();                  // port/http: one try, 127.0.0.1 then ::1
  void connect_to(bool v6);
  void on_connected();             // writable: connect finished
  void on_http_readable();
  void retry_later();
  void arm_attempt_deadline();     // a try that hangs is abandoned
  void close_socket();
  void succeed(const ReadyMatch& m);
  void check_notified();

  EventLoop& loop_;
  ReadyCondition cond_;
  std::string dir_;
  OnReady on_ready_;
  bool done_ = false;

  std::shared_ptr<LogWatch> log_;
  std::uint64_t log_token_ = 0;

  UniqueFd sock_;
  bool watching_ = false;
  bool v6_ = false;                // the try under way is on ::1
  std::string response_;
  std::uint64_t timer_ = 0;        // retry or attempt deadline
  std::chrono::milliseconds backoff_{50};
};

}  // namespace sup
