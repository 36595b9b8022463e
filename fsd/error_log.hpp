#pragma once
// The latest rejected requests, as the `errors` file shows them: one JSON
// object per line, newest last, at most 100. Thread-safe.
// Implemented in errors_file.cpp, next to the file that shows it.
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

#include "supervisor/error.hpp"

namespace sup {
class Supervisor;
}

namespace fsd {

class ErrorLog {
 public:
  static constexpr std::size_t kCapacity = 100;
  static constexpr std::size_t kRequestChars = 200;
  static constexpr std::size_t kReasonChars = 300;

  explicit ErrorLog(const sup::Supervisor& sup) : sup_(sup) {}

  /// Records a rejected request. `path` is where it was written ("cmd",
  /// "procs/ID/cmd", "procs/NAME (mkdir)"...); it, `reason` and `request` are
  /// masked with the global secrets and those of command `id`, then cut to
  /// kReasonChars and kRequestChars (a parser's message may quote a whole
  /// token). Also logged to the daemon's log. Returns the reason as shown.
  std::string add(std::string_view path, int err, std::string_view reason, std::string_view request,
                  const std::string& id = "");
  /// The same for a refusal with the supervisor's `code` (shown as the errno it is answered with).
  std::string add(std::string_view path, sup::Errc code, std::string_view reason, std::string_view request,
                  const std::string& id = "");

  /// All lines, oldest first, each ending in "\n".
  std::string text() const;

 private:
  const sup::Supervisor& sup_;
  mutable std::mutex mu_;
  std::deque<std::string> lines_;  // guarded by mu_
};

}  // namespace fsd
