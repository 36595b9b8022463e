#pragma once
// The last refusal of one open file, so that the same bytes refused again
// for the same reason (a buffered writer such as Python's writes them again
// at close) add no second line to `errors`: one refusal, one line.
//
// Thread-safety: locks itself (writes of one open file may come from
// several threads at once).
#include <mutex>
#include <string>
#include <string_view>

#include "fsd/error_log.hpp"

namespace fsd {

class RefusalMemory {
 public:
  /// A refusal as `errors` shows it, and whether it repeats the last one.
  struct Shown {
    std::string reason;  ///< as ErrorLog::add returned it (the first time)
    bool repeated = false;
  };

  /// Adds the line of a refusal of `bytes` with errno `err` for `reason`
  /// (the rest as ErrorLog::add takes it), unless this open file's last
  /// refusal was of the same bytes, errno and reason: then nothing is added.
  Shown add(ErrorLog& errors, std::string_view path, int err, std::string_view reason, std::string_view request,
            const std::string& id, std::string_view bytes);
  Shown add(ErrorLog& errors, std::string_view path, sup::Errc code, std::string_view reason,
            std::string_view request, const std::string& id, std::string_view bytes);

  /// A write was taken: the same refusal after it is a new one.
  void forget();

 private:
  std::mutex mu_;
  bool any_ = false;     // guarded by mu_: a refusal is remembered
  int err_ = 0;          // guarded by mu_: its errno
  std::string bytes_;    // guarded by mu_: the bytes refused
  std::string reason_;   // guarded by mu_: the reason given
  std::string shown_;    // guarded by mu_: the reason as `errors` showed it
};

}  // namespace fsd
