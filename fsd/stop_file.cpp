// procs/ID/stop: any write stops the command's whole process tree (the
// monitor sends TERM, then KILL after the grace) and returns, with the full
// length, once nothing of it is left. The write is parked until the `ended`
// event: no worker thread waits. Interrupted: EINTR at once, the stop goes on.
// On an ended command (or an empty slot) the write succeeds at once, and so
// does one from inside the command's own tree, once the stop has begun.
// Opening it for writing and closing it with nothing written (`touch stop`,
// `: > stop`, `truncate -s 0 stop`) stops likewise: at that close (flush),
// which returns once the command is over; a close after a write is no stop.
#include <atomic>

#include "fsd/files.hpp"
#include "fsd/opener_process.hpp"
#include "fsd/record_handle.hpp"

namespace fsd {

namespace {

class StopHandle : public RecordHandle {
 public:
  StopHandle(Filesystem& fs, const Node& node, pid_t opener) : RecordHandle(fs, node, "stop"), opener_(opener) {}

  Reply write(fuse_req_t req, std::string_view data, off_t) override {
    stopped_ = true;
    return stop(req, data, Reply::written(data.size()));
  }

  Reply flush(fuse_req_t req) override {
    // A child's close of the copy it inherited is no stop.
    if (!opener_.includes(fuse_req_ctx(req)->pid) || stopped_.exchange(true)) return Reply::error(0);
    return stop(req, "", Reply::error(0));
  }

 private:
  /// Stops the command; `done` answers `req` once it is over.
  Reply stop(fuse_req_t req, std::string_view data, Reply done) {
    // Looked at before the stop: a command that ends at its TERM at once
    // (a lone `sleep`) may be over already when the stop returns, and it
    // was still stopped (note_action completes a step whose end came first).
    const std::optional<sup::CommandStatus> rec = fs_.sup().status(id_);
    if (rec && !opened_.ours(*rec)) return removed();
    const sup::Status st = fs_.sup().stop(id_);
    if (!st) {
      fs_.errors().add(path_, st.error().code, st.error().message, data, id_);
      return Reply::fail(st.error());
    }
    if (rec && !rec->over()) fs_.note_action("stop", rec->cmd_full, id_, &*rec);
    // The command stopping itself would wait for its own end: its TERM
    // handler could never return from the write, and the grace would end
    // it with SIGKILL. Answered once the stop has begun.
    if (fs_.sup().in_tree(id_, fuse_req_ctx(req)->pid)) return done;
    // No cap: the monitor kills what TERM leaves after the grace, so the
    // end comes; a reader who gives up is released by its signal.
    fs_.parked().park(req, id_, ParkedRequests::Until::ended, std::nullopt,
                      [done](ParkedRequests::Outcome) { return done; });
    return Reply::parked();
  }

  std::atomic<bool> stopped_{false};  // a write or a close stopped it already
  const OpenerProcess opener_;        // whose close is a stop
};

}  // namespace

std::unique_ptr<Handle> open_stop(Filesystem& fs, const Node& node, const OpenRequest& req) {
  return std::make_unique<StopHandle>(fs, node, req.who.pid);
}

}  // namespace fsd
