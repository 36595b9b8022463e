// procs/ID/wait: a read blocks until the command has ended (or the wait cap
// ran out), then answers {"proc": {record + logTail}, "stillRunning": bool}.
// Reading it on an ended command (or an empty slot) answers at once.
//
// The read is parked (BlockingReadHandle, ParkedRequests), never a sleeping
// thread: the supervisor's `ended` event or the cap timer answers it; an
// interrupt (Ctrl-C, `timeout`) answers EINTR at once and leaves the command
// alone. poll(): readable once the command has ended.
//
// `wait,timeoutSec=N` caps this read alone (then "stillRunning": true);
// `wait,tailBytes=N` sets how much of the log `logTail` holds (default 4096).
#include "fsd/blocking_read.hpp"
#include "fsd/files.hpp"

namespace fsd {

namespace {

class WaitHandle : public BlockingReadHandle {
 public:
  WaitHandle(Filesystem& fs, const Node& node, Requester reader)
      : BlockingReadHandle(fs, node, reader, ParkedRequests::Until::ended),
        tail_bytes_(tail_bytes_of(node, Filesystem::kDefaultTailBytes)) {}

 private:
  const std::size_t tail_bytes_;

  std::string build(const sup::CommandStatus& st, ParkedRequests::Outcome why) override {
    nlohmann::json proc = fs_.record_json(st, reader_);
    proc["logTail"] = fs_.log_tail(st, tail_bytes_);
    return dump_json({{"proc", std::move(proc)}, {"stillRunning", why == ParkedRequests::Outcome::capped}});
  }
};

}  // namespace

std::unique_ptr<Handle> open_wait(Filesystem& fs, const Node& node, const OpenRequest& req) {
  const Requester& reader = req.who;
  return std::make_unique<WaitHandle>(fs, node, reader);
}

}  // namespace fsd
