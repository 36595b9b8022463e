// procs/ID/ready: write a readiness condition (`port 3000`, `log REGEX`,
// `http 3000 /health`, or JSON with readyPort / readyLog / readyHttp) to set
// or replace it; a read blocks until the command is ready, or has ended, or
// the wait cap ran out, then answers
//   {"proc": {...}, "ready": true, "readyAt": "...", "stillRunning": true}
// with "ready": false when it ended first (or the cap ran out: then
// "stillRunning": true). Blocking works as for `wait` (BlockingReadHandle).
//
// `ready,timeoutSec=N` caps this read alone; `ready,tailBytes=N` adds the
// last N bytes of the log to the answer's proc as `logTail`;
// `ready,readyPort=N` waits for port N for this reader alone (a
// ReaderCondition): the record's condition (readyWhen) is neither needed,
// used nor replaced, and "readyAt" is when this reader's condition held.
#include <atomic>
#include <cerrno>

#include "fsd/blocking_read.hpp"
#include "fsd/files.hpp"
#include "supervisor/ready_condition.hpp"

namespace fsd {

namespace {

class ReadyHandle : public BlockingReadHandle {
 public:
  ReadyHandle(Filesystem& fs, const Node& node, Requester reader)
      : BlockingReadHandle(fs, node, reader, ParkedRequests::Until::ready), tail_bytes_(tail_bytes_of(node, 0)) {
    if (const std::optional<std::int64_t> port = node.keys().number("readyPort")) {
      sup::ReadyCondition c;
      c.kind = sup::ReadyCondition::Kind::port;
      c.port = static_cast<int>(*port);
      wait_for(std::make_unique<ReaderCondition>(fs.sup(), fs.parked(), id_, std::move(c)));
    }
  }

  Reply read(fuse_req_t req, std::size_t size, off_t off) override {
    // Nothing to wait for: say so rather than block until the end.
    if (const auto st = fs_.sup().status(id_, sup::CpuFigure::skip);
        !own_condition() && st && st->running && st->ready_when.empty()) {
      const std::string reason = "'" + id_ + "' has no ready condition: write one to this file first "
                                 "('port N', 'log REGEX' or 'http N /PATH'), or read ready,readyPort=N";
      fs_.errors().add("procs/" + id_ + "/ready", EINVAL, reason, "", id_);
      return Reply::error(EINVAL);
    }
    return BlockingReadHandle::read(req, size, off);
  }

  Reply write(fuse_req_t, std::string_view data, off_t) override {
    const std::string path = "procs/" + id_ + "/ready";
    // The rest of an oversized line (stdio writes on after a failed write): no new condition.
    if (too_big_) return Reply::error(E2BIG);
    sup::Result<sup::ReadyCondition> cond = sup::parse_ready_condition(data);
    if (!cond) {
      too_big_ = cond.error().code == sup::Errc::too_big;
      fs_.errors().add(path, cond.error().code, cond.error().message, data, id_);
      return Reply::fail(cond.error());
    }
    if (const sup::Status st = fs_.sup().set_ready(id_, *cond); !st) {
      fs_.errors().add(path, st.error().code, st.error().message, data, id_);
      return Reply::fail(st.error());
    }
    fs_.note_action("ready", "ready when " + std::string(data.substr(0, 200)), id_);
    return Reply::written(data.size());
  }

 private:
  std::atomic<bool> too_big_{false};  // refusing the rest of an oversized line until close
  const std::size_t tail_bytes_;        // 0: no logTail

  std::string build(const sup::CommandStatus& st, ParkedRequests::Outcome why) override {
    const ReaderCondition* own = own_condition();
    // A reader's own condition that held just before the end was met first.
    const bool ready = why == ParkedRequests::Outcome::ready || (own && own->met());
    const std::string ready_at = own ? own->met_at() : st.ready_at;
    nlohmann::json proc = fs_.record_json(st, reader_);
    if (tail_bytes_ > 0) proc["logTail"] = fs_.log_tail(st, tail_bytes_);
    nlohmann::json j = {
        {"proc", std::move(proc)},
        {"ready", ready},
        {"readyAt", ready && !ready_at.empty() ? nlohmann::json(ready_at) : nlohmann::json(nullptr)},
        {"stillRunning", st.running},
    };
    if (own) j["readyWhen"] = own->condition().describe();
    return dump_json(j);
  }
};

}  // namespace

std::unique_ptr<Handle> open_ready(Filesystem& fs, const Node& node, const OpenRequest& req) {
  const Requester& reader = req.who;
  return std::make_unique<ReadyHandle>(fs, node, reader);
}

}  // namespace fsd
