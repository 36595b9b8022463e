// procs/ID/stop: any write stops the command's whole process tree (the
// monitor sends TERM, then KILL after the grace) and returns, with the full
// length, once nothing of it is left. The write is parked until the `ended`
// event: no worker thread waits. Interrupted: EINTR at once, the stop goes on.
// On an ended command (or an empty slot) the write succeeds at once.
#include "fsd/errno_map.hpp"
#include "fsd/files.hpp"

namespace fsd {

namespace {

class StopHandle : public Handle {
 public:
  StopHandle(Filesystem& fs, std::string id) : fs_(fs), id_(std::move(id)) {}

  Reply write(fuse_req_t req, std::string_view data, off_t) override {
    const sup::Status st = fs_.sup().stop(id_);
    if (!st) {
      fs_.errors().add("procs/" + id_ + "/stop", to_errno(st.error().code), st.error().message, data, id_);
      return Reply::fail(st.error());
    }
    const std::optional<sup::CommandStatus> rec = fs_.sup().status(id_);
    if (rec && rec->running) fs_.note_action("stop", rec->cmd_full, id_, &*rec);
    const std::size_t n = data.size();
    // No cap: the monitor kills what TERM leaves after the grace, so the
    // end comes; a reader who gives up is released by its signal.
    fs_.parked().park(req, id_, ParkedRequests::Until::ended, std::nullopt,
                      [n](ParkedRequests::Outcome) { return Reply::written(n); });
    return Reply::parked();
  }

 private:
  Filesystem& fs_;
  const std::string id_;
};

}  // namespace

std::unique_ptr<Handle> open_stop(Filesystem& fs, const Node& node) {
  return std::make_unique<StopHandle>(fs, node.id());
}

}  // namespace fsd
