// `cmd` and procs/ID/cmd: writing a request starts a command.
//
// Bytes written on one open file accumulate (offsets ignored) until the
// request is complete:
//   - JSON (first non-blank byte '{'): at the write after which the buffer
//     parses as one JSON value, or holds a syntax error before its end
//     (more bytes cannot mend it: rejected in that write);
//   - text: at a write that ends in "\n" and is shorter than 128 KiB (a
//     longer one may be the first half of a large write the kernel split:
//     one write(2) of 1 MiB + 5 bytes arrives as two WRITEs, split at a page
//     of the writer's buffer); the whole buffer is one shell command; or at once when
//     it holds bytes that no text can hold (a NUL, bytes that are not UTF-8);
//   - anything still buffered at flush (close), or at a read on the same file.
// The request is validated and started by the write that completes it, so
// the write's result is the start's result; its answer, "<bgId>\n" or
// "error: ERRNO: reason\n", is then readable from the same open file. The
// reader's file position is where that write left it (after it if it
// succeeded, at it if it failed), so the answer is served from that offset
// on, or from where its first read begins when that is before (a seek back
// to 0). A rejected request also goes to `errors`. The next write on the file
// starts a new request; a write of blanks alone before a request (or after
// one) is taken and skipped, so a request may follow it; and one
// that repeats the refused bytes is refused again: the whole request (a
// buffered writer's retry) refused for what no time changes (EINVAL, E2BIG,
// ENAMETOOLONG), or the rest of a write(2) the kernel split whose later
// part was refused (the writer got a short count and writes the rest again
// from where that part began: never a command of its own). The whole
// request refused for what may pass (EBUSY, EEXIST, EAGAIN...) is a request
// again; the same refusal of it adds no second line to `errors`.
//
// A start holds no FUSE thread: the request (write, flush or read) that
// completes it is parked and answered from the supervisor's event thread
// when the monitor reports the exec (Supervisor::start_async); only its
// validation runs here. While it is under way, another write or read on the
// same open file fails with EBUSY (the kernel sends them only from other
// threads or processes sharing the file) and a flush answers at once. An
// interrupt of the parked request (Ctrl-C, `timeout`) calls the start off:
// EINTR, nothing started, no record (StartRequests).
//
// A file opened write-only and closed with nothing written (`: > cmd`) is an
// empty request: EINVAL at that close (flush), and a line in `errors`.
//
// procs/ID/cmd starts the request in slot ID (empty, or its command ended:
// replaced; running: EBUSY); a read without a write shows the command.
#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <functional>
#include <mutex>
#include <stop_token>

#include "fsd/errno_map.hpp"
#include "fsd/files.hpp"
#include "fsd/open_elsewhere.hpp"
#include "fsd/opener_process.hpp"
#include "fsd/refusal_memory.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/utf8.hpp"

namespace fsd {

namespace {

constexpr std::size_t kSplitWrite = 128 * 1024;
/// How much of a refused part is kept to know a rewrite of it by.
constexpr std::size_t kPartHead = 4096;

constexpr const char* kUsage =
    "Write a shell command to this file to start it, e.g.\n"
    "  echo 'make test' > cmd\n"
    "or a JSON request: {\"cmd\": \"make\", \"cwd\": \"/src\", \"name\": \"build\"}.\n"
    "Read the same open file after the write for the new command's id:\n"
    "  exec 3<>cmd; echo 'make test' >&3; read -r id <&3\n"
    "See README.\n";

class CmdHandle : public Handle {
 public:
  /// `slot`: the bgId for procs/ID/cmd, empty for the root `cmd`.
  /// `who`: the opener, whose credentials a command started through this
  /// open file runs with under allow_other.
  CmdHandle(Filesystem& fs, std::string slot, std::string shown, fuse_ino_t ino, bool write_only, const Requester& who)
      : fs_(fs), slot_(std::move(slot)), shown_(std::move(shown)), ino_(ino), write_only_(write_only), opener_(who.pid) {
    if (fs_.config().allow_other) run_as_ = sup::Credentials{who.uid, who.gid, who.groups()};
  }

  Reply write(fuse_req_t req, std::string_view data, off_t off) override {
    std::unique_lock g(mu_);
    wrote_ = true;
    opener_.wrote(fuse_req_ctx(req)->pid);
    if (starting_) {
      fs_.errors().add(path(), EBUSY, "a start is under way on this open file: write the next request after it answered",
                       sup::mask_secrets_in_json(data, secrets_of(data)), slot_);
      return Reply::error(EBUSY);
    }
    if (too_big_) return Reply::error(E2BIG);  // the rest of a rejected oversized write
    if (done_) {
      // Blanks after a request (a JSON request's newline written apart, by
      // `dd bs=1` or a printf of "...}\n\n"): no request, and no error for a
      // command that did start.
      if (is_blank(data)) {
        // The writer's position moved past them: the answer begins there.
        if (!answer_read_) answer_at_ = std::max(answer_at_, off + static_cast<off_t>(data.size()));
        return Reply::written(data.size());
      }
      // The rejected bytes again (Python's buffered writer retries them at
      // close), refused for what no time changes, or the rest of a write(2)
      // the kernel split and whose last part was refused (the writer got
      // the first parts' count and writes the rest again, from where the
      // refused part began): the same answer, no second line in `errors`,
      // and never a request of its own. Bytes refused for what may pass
      // (a running slot, a name in use, a limit) are a request again.
      if (rejected_error_ && ((data == rejected_ && lasting(rejected_error_->code)) || refused_rest(data, off)))
        return Reply::fail(*rejected_error_);
      // (A part kept without its refusal's errno: the start was called off.)
      if (!rejected_error_ && refused_rest(data, off)) {
        fs_.errors().add(path(), ECANCELED,
                         "the rest of a request that a signal called off, which is no request of its own: "
                         "write the whole request again",
                         sup::mask_secrets_in_json(data, secrets_of(data)), slot_);
        return Reply::error(ECANCELED);
      }
      buf_.clear();
      done_ = false;
      rejected_error_.reset();
      refused_part_.reset();
    }
    // Blanks alone before a request (`echo > cmd`, a blank line before a
    // JSON request written in pieces): taken and skipped, no request.
    if (buf_.empty() && is_blank(data)) return Reply::written(data.size());
    if (buf_.size() + data.size() > fs_.config().max_request) {
      // Keep refusing on this open file until close: the kernel may send the
      // rest of a large write as further chunks, which are no new request.
      too_big_ = true;
      const std::string reason = "request larger than " + std::to_string(fs_.config().max_request) + " bytes";
      buf_.append(data.substr(0, ErrorLog::kRequestChars));
      return Reply::fail(finish_rejected({sup::Errc::too_big, reason}, off));
    }
    buf_.append(data);
    end_ = off + static_cast<off_t>(data.size());
    if (!complete(data)) return Reply::written(data.size());
    // Earlier parts of this request were taken: should this part be
    // refused, finish_rejected() keeps what tells a rewrite of it.
    split_part_.reset();
    if (buf_.size() > data.size()) split_part_ = Part{off, std::string(data.substr(0, kPartHead))};
    // A failed write leaves the reader's position where the write began.
    const std::size_t n = data.size();
    return start(g, req, off + static_cast<off_t>(n), off,
                 [n](const sup::Error* refused) { return refused ? Reply::fail(*refused) : Reply::written(n); });
  }

  Reply flush(fuse_req_t req) override {
    std::unique_lock g(mu_);
    too_big_ = false;
    if (starting_) return Reply::error(0);  // the request that started it answers for it
    // A child's close of the copy it inherited, if it did not write through
    // it, neither ends a request nor is an empty one.
    const pid_t closer = fuse_req_ctx(req)->pid;
    if (!opener_.includes(closer)) return Reply::error(0);
    if (!wrote_ && !done_ && write_only_ && (closed_as_one_ || !open_elsewhere(closer, path("/"), ino_)))
      return Reply::fail(finish_rejected(
          {sup::Errc::invalid_argument, "empty request: the file was closed with nothing written"}, end_));
    if (done_ || is_blank(buf_)) return Reply::error(0);  // bash flushes before it writes
    split_part_.reset();  // every write of it was answered in full
    return start(g, req, end_, end_,
                 [](const sup::Error* refused) { return refused ? Reply::fail(*refused) : Reply::error(0); });
  }

  Reply read(fuse_req_t req, std::size_t size, off_t off) override {
    std::unique_lock g(mu_);
    if (starting_) return Reply::error(EBUSY);  // its answer is not there yet
    // `printf 'x' >&3; read <&3`: no newline, no flush: this read starts it.
    if (!done_ && !is_blank(buf_)) {
      split_part_.reset();  // every write of it was answered in full
      return start(g, req, off, off, [this, size, off](const sup::Error*) { return answer(size, off); });
    }
    if (!done_) return Reply::slice(shown_, off, size);
    return answer(size, off);
  }

 private:
  /// Whether a refusal for `code` holds for the same bytes whenever they
  /// come: they are malformed or too large, whatever the time and the box.
  static bool lasting(sup::Errc code) {
    return code == sup::Errc::invalid_argument || code == sup::Errc::too_big || code == sup::Errc::name_too_long;
  }

  static bool is_blank(std::string_view s) {
    return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
  }

  /// Whether `text` is one JSON value, or never will be: a syntax error
  /// before the end (an error at the end may be the end of a partial write).
  static bool json_complete(const std::string& text) {
    try {
      return !nlohmann::json::parse(text).is_discarded();
    } catch (const nlohmann::json::parse_error& e) {
      return e.byte <= text.size();
    } catch (const nlohmann::json::exception&) {
      return true;  // a number out of range
    }
  }

  /// Whether the buffer, after `last` was appended, holds a whole request.
  bool complete(std::string_view last) const {
    const std::size_t first = buf_.find_first_not_of(" \t\r\n");  // blanks alone are never buffered
    if (buf_[first] == '{') return json_complete(buf_);
    if (sup::never_text(buf_)) return true;  // binary data: refused at once
    return last.size() < kSplitWrite && !last.empty() && last.back() == '\n';
  }

  /// The answer of the last request, as a read at `off` sees it. Holds mu_.
  Reply answer(std::size_t size, off_t off) {
    // It starts where the writes left the file; a first read of it from
    // before that place (Python's seek(0) after its write, a pread at 0)
    // moves it there, so that the reads after that one go on from where it
    // stopped, and never serve its end twice.
    if (!answer_read_) {
      answer_read_ = true;
      answer_at_ = std::min(answer_at_, off);
    }
    const off_t rel = off >= answer_at_ ? off - answer_at_ : off;
    return Reply::slice(answer_, rel, size);
  }

  /// The reply of the request that completed a start, from its refusal (null: started).
  using MakeReply = std::function<Reply(const sup::Error* refused)>;

  /// Validates the buffered request and starts it; the answer is served
  /// from file offset `ok_at` (started) or `err_at` (rejected). A request
  /// refused here is answered at once; else parked: started() answers it.
  Reply start(std::unique_lock<std::mutex>& g, fuse_req_t req, off_t ok_at, off_t err_at, MakeReply make_reply) {
    step_written_ = false;  // the last request's step is done with, whatever this one becomes
    started_id_.clear();
    Requester who = Requester::of(req);
    who.load_client();  // once per request
    sup::Result<sup::StartSpec> spec = sup::parse_request(buf_, who.cwd());
    if (!spec) {
      const sup::Error refused = finish_rejected(spec.error(), err_at, &who);
      return make_reply(&refused);
    }
    if (!slot_.empty()) {
      // Held open across an rmdir, and the name made again by someone this
      // writer may not see: not theirs to run in.
      if (!fs_.find(slot_, who)) {
        const sup::Error refused =
            finish_rejected({sup::Errc::not_found, "procs/" + slot_ + " is gone since this file was opened"}, err_at, &who);
        return make_reply(&refused);
      }
      if (!spec->name.empty() && spec->name != slot_) {
        const sup::Error refused = finish_rejected(
            {sup::Errc::invalid_argument, "\"name\" must be \"" + slot_ + "\" (or absent) in procs/" + slot_ + "/cmd"},
            err_at, &who);
        return make_reply(&refused);
      }
      spec->name = slot_;
    }
    spec->requester_sid = who.sid;
    spec->requester_client = who.client;
    // Where sbx-step finds the tree (SBX_BGID is set by the supervisor).
    spec->env.try_emplace("SBX_MOUNT", fs_.config().mountpoint);
    spec->requester_uid = who.uid;
    spec->requester_pid = who.pid;
    if (run_as_ && who.uid != run_as_->uid && spec->cwd_is_writers) {
      // Written by another user than the opener (a setuid program): its
      // folder is no folder of the opener's, and is checked and entered
      // with the opener's rights, as one a request names.
      spec->cwd_is_writers = false;
    }
    if (run_as_) {
      // The opener's rights, not the writer's: the file was opened with
      // them, and a setuid program that writes what its user gave it to a
      // descriptor it was handed (`su 'TEXT' 2> cmd`) starts nothing as root.
      spec->run_as = run_as_;
      spec->requester_uid = run_as_->uid;
    }
    starting_ = true;  // buf_ stays as it is until started(): it is what errors show
    g.unlock();        // started() may run at once, on this thread
    const std::stop_token stop = fs_.starts().add(req);
    fs_.sup().start_async(
        *spec, slot_.empty() ? sup::StartMode::new_only : sup::StartMode::reuse_slot,
        [this, req, ok_at, err_at, who, make_reply = std::move(make_reply)](sup::Result<sup::CommandStatus> st) {
          started(req, st, ok_at, err_at, who, make_reply);
        },
        stop, [this](const sup::CommandStatus& st) { published(st); });
    return Reply::parked();
  }

  /// The record is listed and its command about to be let go to exec: its
  /// step is written now, so that a daemon killed before started() cannot
  /// leave a command that ran without one (on the event thread).
  void published(const sup::CommandStatus& st) {
    fs_.note_action("start", st.cmd_full, st.bg_id, &st);
    std::lock_guard g(mu_);
    step_written_ = true;
    started_id_ = st.bg_id;
  }

  /// The start's outcome: the answer is fixed, then the request answered.
  /// The file stays open until then (the kernel sends no release while a
  /// request on it is unanswered), so `this` is alive.
  void started(fuse_req_t req, const sup::Result<sup::CommandStatus>& st, off_t ok_at, off_t err_at,
               const Requester& who, const MakeReply& make_reply) {
    Reply r = Reply::error(0);
    {
      std::lock_guard g(mu_);
      starting_ = false;
      std::optional<sup::Error> refused;
      if (!st) {
        refused = finish_rejected(st.error(), err_at, &who);
      } else {
        refusals_.forget();
        // A slot's run before this one may be in the kernel's page cache
        // (ended_output_cache.hpp): its pages are dropped before the answer,
        // so that a descriptor held open reads this run once the start returned.
        fs_.ended_output().changed(st->bg_id);
        fs_.node_of(*st, Kind::record_dir);  // learn its serial now
        if (!step_written_) fs_.note_action("start", st->cmd_full, st->bg_id, &*st);  // queued: never let go yet
        finish(st->bg_id + "\n", ok_at);
      }
      r = make_reply(refused ? &*refused : nullptr);
    }
    fs_.starts().forget(req);
    fs_.invalidator().after_drops([req, r] { send_reply(req, r); });
  }

  /// The file's path in the tree, as errors names it (and, after a "/", as /proc ends it).
  std::string path(const char* root = "") const {
    std::string p(root);
    p += slot_.empty() ? "cmd" : "procs/" + slot_ + "/cmd";
    return p;
  }

  /// The reason (which may quote the request: a cwd, a key) and the request
  /// are shown with the request's own secrets masked, then the global ones.
  /// `who` (null: unknown) also gets a refused step in the box's steps.
  /// Returns `refused`.
  sup::Error finish_rejected(const sup::Error& refused, off_t at, const Requester* who = nullptr) {
    std::optional<Part> part = std::move(split_part_);
    const std::vector<std::string> secrets = secrets_of(buf_);
    // However the request's JSON escapes spell a secret, it is found.
    const std::string request = sup::mask_secrets_in_json(buf_, secrets);
    std::string rejected = buf_;
    // The same request refused again for the same reason (tried anew after
    // a refusal that may pass, and it did not): one line, one step.
    const RefusalMemory::Shown shown = refusals_.add(
        fs_.errors(), path(), refused.code, sup::mask_secrets(refused.message, secrets), request, slot_, rejected);
    if (who && step_written_) fs_.note_start_failed(started_id_, refused.code, shown.reason);
    else if (who && !shown.repeated)
      fs_.note_refused_start(fs_.mask(request, slot_), refused.code, shown.reason, *who, secrets, slot_);
    finish(std::string("error: ") + errno_name(refused.code) + ": " + shown.reason + "\n", at);
    if (refused.code == sup::Errc::interrupted) {
      // Called off by a signal. Written again whole (a writer retries an
      // interrupted write: Python, dd), it starts anew, not the same EINTR
      // forever. The rest of a split write(2), written again after the
      // short count, is no request of its own and cannot finish this one
      // (its first pieces are gone): refused with ECANCELED.
      refused_part_ = std::move(part);
      return refused;
    }
    rejected_ = std::move(rejected);
    rejected_error_ = refused;
    refused_part_ = std::move(part);
    return refused;
  }

  /// The secrets a request's text is shown without: its own secretEnv (if it
  /// parses), the slot's and the global ones.
  std::vector<std::string> secrets_of(std::string_view request) const {
    std::vector<std::string> secrets = sup::request_secrets(request);
    for (std::string& s : fs_.sup().secrets(slot_)) secrets.push_back(std::move(s));
    return secrets;
  }

  /// Whether a write at `off` is the writer's second try of the rest of a
  /// split write(2) whose refused part began there: it starts with that
  /// part's bytes (the kernel may split the rest at other places).
  bool refused_rest(std::string_view data, off_t off) const {
    if (!refused_part_ || off != refused_part_->off) return false;
    const std::size_t n = std::min(data.size(), refused_part_->head.size());
    return n > 0 && data.substr(0, n) == std::string_view(refused_part_->head).substr(0, n);
  }

  void finish(std::string answer, off_t at) {
    split_part_.reset();
    answer_ = std::move(answer);
    answer_at_ = at;
    answer_read_ = false;
    buf_.clear();
    done_ = true;
  }

  Filesystem& fs_;
  const std::string slot_;
  const std::string shown_;  // what a read without a write shows
  const fuse_ino_t ino_;
  const bool write_only_;    // opened O_WRONLY: a close with nothing written is an empty request
  std::optional<sup::Credentials> run_as_;  // under allow_other: the opener's, taken at the open
  OpenerProcess opener_;  // whose close counts (the opener's, a writer's); guarded by mu_
  std::mutex mu_;
  std::string buf_;             // guarded by mu_: the request being written
  bool wrote_ = false;          // guarded by mu_: a write came on this open file
  bool done_ = false;           // guarded by mu_: a request completed; the next write starts anew
  bool too_big_ = false;        // guarded by mu_: refusing the rest of an oversized write
  bool starting_ = false;       // guarded by mu_: a start is under way (buf_ is its request)
  bool step_written_ = false;   // guarded by mu_: the start under way has its step (published())
  std::string started_id_;      // guarded by mu_: and this bgId
  std::string answer_;          // guarded by mu_: "<bgId>\n" or "error: ...\n"
  std::string rejected_;        // guarded by mu_: the bytes of the request last refused
  std::optional<sup::Error> rejected_error_;  // guarded by mu_: why it was refused; none after a start
  RefusalMemory refusals_;  // the last refusal's line in `errors`, until a start
  /// A later WRITE of a request that earlier WRITEs began: its file offset and first bytes.
  struct Part {
    off_t off;
    std::string head;
  };
  std::optional<Part> split_part_;    // guarded by mu_: of the request being started
  /// Guarded by mu_: of the request last refused, if it was one; without
  /// rejected_error_, its start was called off by a signal (EINTR).
  std::optional<Part> refused_part_;
  off_t end_ = 0;               // guarded by mu_: file offset after the last buffered write
  off_t answer_at_ = 0;         // guarded by mu_: the file offset where answer_ begins
  bool answer_read_ = false;    // guarded by mu_: a read of answer_ came (it fixed answer_at_)
};

}  // namespace

std::unique_ptr<Handle> open_cmd(Filesystem& fs, const Node& node, const OpenRequest& req) {
  const bool write_only = (req.flags & O_ACCMODE) == O_WRONLY;
  if (node.kind == Kind::cmd) return std::make_unique<CmdHandle>(fs, "", kUsage, node.ino, write_only, req.who);
  const sup::CommandStatus& st = *node.record;
  std::string shown = st.state == "empty" ? "" : fs.mask(st.cmd_full, st.bg_id) + "\n";
  return std::make_unique<CmdHandle>(fs, st.bg_id, std::move(shown), node.ino, write_only, req.who);
}

}  // namespace fsd
