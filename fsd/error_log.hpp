#pragma once
// The latest rejected requests, as the `errors` file shows them: one JSON
// object per line, newest last, at most 100. Thread-safe. Kept in the
// state directory too (STATE/errors, appended to, compacted to the last
// 100 lines when it holds twice that), so that they outlive a restart.
// Implemented in errors_file.cpp, next to the file that shows it.
#include <fcntl.h>

#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

#include "supervisor/error.hpp"
#include "supervisor/unique_fd.hpp"

namespace sup {
class Supervisor;
}

namespace fsd {

class ErrorLog {
 public:
  static constexpr std::size_t kCapacity = 100;
  static constexpr std::size_t kRequestChars = 200;
  static constexpr std::size_t kReasonChars = 300;

  /// Takes back the lines of the state directory's file.
  explicit ErrorLog(const sup::Supervisor& sup);

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
  static constexpr int kAppend = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC;

  /// Appends `line` to the file, or rewrites it with lines_ alone when it
  /// holds twice kCapacity. Best effort: a full disk keeps them in memory.
  void keep(const std::string& line);  // needs mu_
  /// The file made of lines_ alone (renamed into place), opened again; false if not written.
  bool rewrite();  // needs mu_, or the constructor

  const sup::Supervisor& sup_;
  const std::string path_;  // STATE/errors
  mutable std::mutex mu_;
  std::deque<std::string> lines_;  // guarded by mu_
  sup::UniqueFd file_;             // guarded by mu_; O_APPEND
  std::size_t in_file_ = 0;        // guarded by mu_; lines in it
};

}  // namespace fsd
