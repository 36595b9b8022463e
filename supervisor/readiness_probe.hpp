#pragma once
// Checks one command's ready condition on the event loop, without burning
// CPU: a log condition reads only the new bytes on each output event and
// matches complete lines (RE2: linear time, so hostile patterns and
// megabyte lines are safe); port and http probes connect without blocking
// and back off from 50 ms to 1 s between tries.
//
// Lives on the loop thread: create, feed and cancel it only from there.
// Callbacks hold a weak_ptr, so a probe may be dropped at any time.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "supervisor/event_loop.hpp"
#include "supervisor/ready_condition.hpp"
#include "supervisor/unique_fd.hpp"

namespace re2 { class RE2; }

namespace sup {

class ReadinessProbe : public std::enable_shared_from_this<ReadinessProbe> {
 public:
  using OnReady = std::function<void()>;

  /// Starts probing; `on_ready` runs once, on the loop thread.
  static std::shared_ptr<ReadinessProbe> start(EventLoop& loop, const ReadyCondition& c,
                                               std::string log_path, OnReady on_ready);
  ~ReadinessProbe();

  void output();  ///< the log grew
  void finish();  ///< the command ended: match a last unterminated line, stop probing
  void cancel();  ///< stop everything; on_ready will not run

  ReadinessProbe(EventLoop& loop, ReadyCondition c, std::string log_path, OnReady on_ready);

 private:
  void attempt();                  // port/http: one try, 127.0.0.1 then ::1
  void connect_to(bool v6);
  void on_connected();             // writable: connect finished
  void on_http_readable();
  void retry_later();
  void arm_attempt_deadline();     // a try that hangs is abandoned
  void close_socket();
  void succeed();
  bool match_line(std::string_view line);

  EventLoop& loop_;
  ReadyCondition cond_;
  std::string log_path_;
  OnReady on_ready_;
  bool done_ = false;

  std::unique_ptr<re2::RE2> re_;
  std::uint64_t offset_ = 0;
  std::string partial_;

  UniqueFd sock_;
  bool watching_ = false;
  bool v6_ = false;                // the try under way is on ::1
  std::string response_;
  std::uint64_t timer_ = 0;        // retry or attempt deadline
  std::chrono::milliseconds backoff_{50};
};

}  // namespace sup
