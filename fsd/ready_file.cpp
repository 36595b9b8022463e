// procs/ID/ready: a read blocks until the command is ready, or has ended,
// or the wait cap ran out, then answers
//   {"proc": {...}, "ready": true, "readyAt": "...", "matched": {...}, "stillRunning": true}
// with "ready": false when it ended first (or the cap ran out: then
// "stillRunning": true). Blocking works as for `wait` (BlockingReadHandle).
//
// Whose condition a reader waits for:
// - written on this open file and read back on it (`exec 3<>ready; echo
//   'log ^up' >&3; cat <&3`), or given in the name (`ready,readyPort=N`,
//   `ready,readyLog=RE`): this reader's alone (a ReaderCondition); the
//   record's condition (readyWhen) is neither needed, used nor replaced;
// - else the record's, as it is at this file's first read: a reader keeps
//   it when the record's condition is replaced meanwhile.
// A write is the record's condition (set_ready) when it cannot be read back
// on this file: at once on a file opened write-only (so that `echo ... >
// ready` gets its errors from the write), at the close of one opened
// read-write that was never read.
//
// `ready,timeoutSec=N` caps this read alone; `ready,tailBytes=N` adds the
// last N bytes of the log to the answer's proc as `logTail`.
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "fsd/blocking_read.hpp"
#include "fsd/files.hpp"
#include "supervisor/ready_condition.hpp"

namespace fsd {

namespace {

/// The condition the name gives (`ready,readyPort=N,...`); nullopt: none.
sup::Result<std::optional<sup::ReadyCondition>> condition_of_name(const FileParams& keys) {
  nlohmann::json j = nlohmann::json::object();
  for (const char* key : {"readyPort", "readyIntervalMs"})
    if (const std::optional<std::int64_t> n = keys.number(key)) j[key] = *n;
  for (const char* key : {"readyLog", "readyLogStream"})
    if (const std::optional<std::string> t = keys.text(key)) j[key] = *t;
  return sup::ready_condition_from_json(j, sup::ReadyKeys::file_name);
}

class ReadyHandle : public BlockingReadHandle {
 public:
  ReadyHandle(Filesystem& fs, const Node& node, Requester reader, bool readable)
      : BlockingReadHandle(fs, node, reader, ParkedRequests::Until::ready),
        tail_bytes_(tail_bytes_of(node, 0)),
        readable_(readable),
        name_(node.keys().empty() ? std::string("ready") : "ready," + node.keys().given()) {
    // (A name whose keys make no condition was refused at its lookup.)
    if (sup::Result<std::optional<sup::ReadyCondition>> c = condition_of_name(node.keys())) named_ = c.value();
  }

  ~ReadyHandle() override {
    // Written, never read back, closed: the record's condition now.
    if (readable_) (void)give_to_record();
  }

  Reply read(fuse_req_t req, std::size_t size, off_t off) override {
    if (Reply r = decide(); r.type() == Reply::Type::error) return r;
    // Read back after writes on the same open file, the offset counts the
    // bytes written too: the answer starts after them, or where its first
    // read begins when that is before (Python's seek(0) after its write),
    // so that the reads after that one go on from where it stopped.
    off_t at = answer_at_.load();
    if (at < 0) {
      answer_at_.compare_exchange_strong(at, std::min(off, static_cast<off_t>(written_.load())));
      at = answer_at_.load();
    }
    return BlockingReadHandle::read(req, size, off >= at ? off - at : off);
  }

  bool would_block() override {
    if (decide().type() == Reply::Type::error) return false;  // the read says why, at once
    return BlockingReadHandle::would_block();
  }

  Reply poll(fuse_req_t req, fuse_pollhandle* ph, unsigned events) override {
    if (decide().type() == Reply::Type::error) {  // readable: the read fails at once
      if (ph) fuse_pollhandle_destroy(ph);
      return Reply::poll(events & (POLLIN | POLLRDNORM));
    }
    return BlockingReadHandle::poll(req, ph, events);
  }

  Reply write(fuse_req_t, std::string_view data, off_t) override {
    const std::string path = "procs/" + id_ + "/ready";
    // The rest of an oversized line (stdio writes on after a failed write): no new condition.
    if (too_big_) return Reply::error(E2BIG);
    if (named_) {
      // Two conditions for one reader, or a record's condition written
      // through a name that gives another: neither is what was meant.
      const std::string why = "this name gives a condition of its own (" + name_ +
                              "): write a condition to ready, or read this name without writing";
      fs_.errors().add("procs/" + id_ + "/" + name_, EINVAL, why, data, id_);
      return Reply::error(EINVAL);
    }
    sup::Result<sup::ReadyCondition> cond = sup::parse_ready_condition(data);
    if (!cond) {
      too_big_ = cond.error().code == sup::Errc::too_big;
      fs_.errors().add(path, cond.error().code, cond.error().message, data, id_);
      return Reply::fail(cond.error());
    }
    {
      std::lock_guard g(mu_);
      if (decided_) {
        const std::string why = "this open file was read already, with the condition it had then: "
                                "open ready again for another condition";
        fs_.errors().add(path, EBUSY, why, data, id_);
        return Reply::error(EBUSY);
      }
      pending_ = *cond;
      given_ = false;
      summary_ = std::string(data.substr(0, 200));
    }
    written_ += data.size();
    // Nobody can read it back here: the record's, at once (with the errors of this write).
    if (!readable_)
      if (const sup::Status st = give_to_record(); !st) return Reply::fail(st.error());
    return Reply::written(data.size());
  }

 private:
  /// At the first read: whose condition this reader waits for. An error
  /// reply when there is none to wait for; any other reply: go on.
  Reply decide() {
    std::lock_guard g(mu_);
    if (decided_) return Reply::data({});
    std::optional<sup::ReadyCondition> own = pending_ ? pending_ : named_;
    if (!own) {
      const std::optional<sup::CommandStatus> st = fs_.sup().status(id_, sup::CpuFigure::skip);
      // Ended, ready or gone: the record answers at once.
      if (st && st->running && !st->ready) {
        if (!st->ready_cond) {
          const std::string reason = "'" + id_ + "' has no ready condition: write one to this file first "
                                     "('port N', 'log REGEX' or 'http N /PATH'), or read ready,readyPort=N";
          fs_.errors().add("procs/" + id_ + "/" + name_, EINVAL, reason, name_, id_);
          return Reply::error(EINVAL);
        }
        own = st->ready_cond;  // kept if the record's is replaced
        record_cond_ = true;
      }
    }
    decided_ = true;
    if (own) wait_for(std::make_unique<ReaderCondition>(fs_.sup(), fs_.parked(), id_, std::move(*own)));
    return Reply::data({});
  }

  /// A condition written and not read back becomes the record's.
  sup::Status give_to_record() {
    std::optional<sup::ReadyCondition> c;
    std::string summary;
    {
      std::lock_guard g(mu_);
      if (!pending_ || given_ || decided_) return sup::Ok{};
      given_ = true;
      c = pending_;
      summary = summary_;
    }
    const std::string path = "procs/" + id_ + "/ready";
    if (name_taken_by_another()) return OpenedOn::gone();
    if (const sup::Status st = fs_.sup().set_ready(id_, *c); !st) {
      fs_.errors().add(path, st.error().code, st.error().message, summary, id_);
      return st;
    }
    fs_.note_action("ready", "ready when " + summary, id_);
    return sup::Ok{};
  }

  std::atomic<bool> too_big_{false};  // refusing the rest of an oversized line until close
  std::atomic<std::uint64_t> written_{0};  // bytes written on this open file
  std::atomic<off_t> answer_at_{-1};       // where the answer begins in the file, once a read came
  const std::size_t tail_bytes_;        // 0: no logTail
  const bool readable_;                 // opened for reading: a write may be read back
  const std::string name_;              // with its keys, for `errors`
  std::optional<sup::ReadyCondition> named_;  // the name's condition

  std::mutex mu_;
  std::optional<sup::ReadyCondition> pending_;  // the last one written; guarded by mu_
  std::string summary_;                         // its text, for steps and errors; guarded by mu_
  bool given_ = false;                          // pending_ went to the record; guarded by mu_
  bool decided_ = false;                        // the first read chose; guarded by mu_
  std::atomic<bool> record_cond_{false};        // the reader keeps a copy of the record's

  std::string build(const sup::CommandStatus& st, ParkedRequests::Outcome why) override {
    const ReaderCondition* own = own_condition();
    // A reader's own condition that held just before the end was met first.
    const bool ready = why == ParkedRequests::Outcome::ready || (own && own->met_for(st));
    std::string ready_at = st.ready_at;
    std::optional<sup::ReadyMatch> matched = st.ready_match;
    if (own && own->met()) {
      ready_at = own->met_at();
      matched = own->match();
    }
    nlohmann::json proc = fs_.record_json(st, reader_);
    if (tail_bytes_ > 0) proc["logTail"] = fs_.log_tail(st, tail_bytes_);
    nlohmann::json m = nullptr;
    if (ready && matched) {
      m = matched->to_json();
      for (const char* k : {"text", "match"})  // the line may hold a secret
        if (m.contains(k)) m[k] = fs_.sup().mask(m[k].get<std::string>(), id_);
    }
    nlohmann::json j = {
        {"proc", std::move(proc)},
        {"ready", ready},
        {"readyAt", ready && !ready_at.empty() ? nlohmann::json(ready_at) : nlohmann::json(nullptr)},
        {"matched", std::move(m)},
        {"stillRunning", st.running},
    };
    if (own && !record_cond_) j["readyWhen"] = fs_.sup().mask(own->condition().describe(), id_);
    return dump_json(j);
  }
};

}  // namespace

sup::Status check_ready_keys(const FileParams& params) {
  if (sup::Result<std::optional<sup::ReadyCondition>> c = condition_of_name(params); !c) return c.error();
  return sup::Ok{};
}

std::unique_ptr<Handle> open_ready(Filesystem& fs, const Node& node, const OpenRequest& req) {
  const Requester& reader = req.who;
  return std::make_unique<ReadyHandle>(fs, node, reader, (req.flags & O_ACCMODE) != O_WRONLY);
}

}  // namespace fsd
