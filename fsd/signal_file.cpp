// procs/ID/signal: write `15`, `TERM`, `SIGTERM` or `RTMIN+2` (case-insensitive,
// blanks trimmed; sup::parse_signal): the signal goes to the whole tree.
// EINVAL for an unknown signal or a write longer than 32 bytes, ESRCH once the command has ended; the same
// bytes refused again for the same reason on the same open file (Python's
// buffered writer writes them again at close) add no second line to `errors`.
#include <cerrno>
#include <string>

#include "fsd/files.hpp"
#include "fsd/record_handle.hpp"
#include "fsd/refusal_memory.hpp"
#include "supervisor/signal_names.hpp"

namespace fsd {

namespace {

constexpr std::size_t kMaxWrite = 32;

class SignalHandle : public RecordHandle {
 public:
  SignalHandle(Filesystem& fs, const Node& node) : RecordHandle(fs, node, "signal") {}

  Reply write(fuse_req_t, std::string_view data, off_t) override {
    if (std::optional<Reply> gone = removed_since_open()) return *gone;
    // The longest signal's name with blanks around it fits in far less:
    // more is no signal (man sbxfs.5, E2BIG).
    if (data.size() > kMaxWrite) {
      refusals_.add(fs_.errors(), path_, EINVAL,
                    "unknown signal (write a number, TERM or SIGTERM: at most " + std::to_string(kMaxWrite) + " bytes)",
                    data.substr(0, kMaxWrite), id_, data);
      return Reply::error(EINVAL);
    }
    const std::optional<int> parsed = sup::parse_signal(data);
    if (!parsed) {
      refusals_.add(fs_.errors(), path_, EINVAL, "unknown signal (write a number, TERM or SIGTERM)", data, id_, data);
      return Reply::error(EINVAL);
    }
    const int sig = *parsed;
    const sup::Status st = fs_.sup().signal(id_, sig);
    if (!st) {
      refusals_.add(fs_.errors(), path_, st.error().code, st.error().message, data, id_, data);
      return Reply::fail(st.error());
    }
    refusals_.forget();
    const std::optional<sup::CommandStatus> rec = fs_.sup().status(id_);
    const std::string name = sup::signal_name(sig);
    fs_.note_action("signal", name + (rec ? " " + rec->cmd_full : ""), id_, rec ? &*rec : nullptr);
    return Reply::written(data.size());
  }

 private:
  RefusalMemory refusals_;
};

}  // namespace

std::unique_ptr<Handle> open_signal(Filesystem& fs, const Node& node, const OpenRequest&) {
  return std::make_unique<SignalHandle>(fs, node);
}

}  // namespace fsd
