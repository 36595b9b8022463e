// `cmd` and procs/ID/cmd: writing a request starts a command.
//
// Bytes written on one open file accumulate (offsets ignored) until the
// request is complete:
//   - JSON (first non-blank byte '{'): at the write after which the buffer
//     parses as one JSON value, or holds a syntax error before its end
//     (more bytes cannot mend it: rejected in that write);
//   - text: at a write that ends in "\n" and is shorter than 128 KiB (a
//     longer one may be the first half of a large write the kernel split,
//     NOTES.md §4); the whole buffer is one shell command; or at once when
//     it holds bytes that no text can hold (a NUL, bytes that are not UTF-8);
//   - anything still buffered at flush (close), or at a read on the same file.
// The request is validated and started inside the write that completes it,
// so the write's result is the start's result; its answer, "<bgId>\n" or
// "error: ERRNO: reason\n", is then readable from the same open file. The
// reader's file position is where that write left it (after it if it
// succeeded, at it if it failed; NOTES.md §4), so the answer is served from
// that offset on. A rejected request also goes to `errors`. The next write
// on the file starts a new request.
//
// procs/ID/cmd starts the request in slot ID (empty, or its command ended:
// replaced; running: EBUSY); a read without a write shows the command.
#include <algorithm>
#include <cerrno>
#include <mutex>

#include "fsd/errno_map.hpp"
#include "fsd/files.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/utf8.hpp"

namespace fsd {

namespace {

constexpr std::size_t kSplitWrite = 128 * 1024;

constexpr const char* kUsage =
    "Write a shell command to this file to start it, e.g.\n"
    "  echo 'make test' > cmd\n"
    "or a JSON request: {\"cmd\": \"make\", \"cwd\": \"/src\", \"name\": \"build\"}.\n"
    "Read the same open file after the write for the new command's id:\n"
    "  exec 3<>cmd; echo 'make test' >&3; read -r id <&3\n"
    "See README.\n";

/// The values of the request's own secretEnv, if it parses that far: a
/// rejected request has no command whose secrets mask() knows.
std::vector<std::string> request_secrets(std::string_view request) {
  const nlohmann::json j = nlohmann::json::parse(request, nullptr, false);
  std::vector<std::string> out;
  if (!j.is_object() || !j.contains("secretEnv") || !j["secretEnv"].is_object()) return out;
  for (const auto& [key, value] : j["secretEnv"].items()) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) continue;
    out.push_back(value.get<std::string>());
    // As it stands in the request text when it holds a quote, a backslash...
    const std::string quoted = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (quoted.substr(1, quoted.size() - 2) != out.back()) out.push_back(quoted.substr(1, quoted.size() - 2));
  }
  return out;
}

class CmdHandle : public Handle {
 public:
  /// `slot`: the bgId for procs/ID/cmd, empty for the root `cmd`.
  CmdHandle(Filesystem& fs, std::string slot, std::string shown)
      : fs_(fs), slot_(std::move(slot)), shown_(std::move(shown)) {}

  Reply write(fuse_req_t req, std::string_view data, off_t off) override {
    std::lock_guard g(mu_);
    if (too_big_) return Reply::error(E2BIG);  // the rest of a rejected oversized write
    if (done_) {
      // The rejected bytes again (Python's buffered writer retries them at
      // close): the same answer, no second line in `errors`.
      if (rejected_err_ && data == rejected_) return Reply::error(rejected_err_);
      buf_.clear();
      done_ = false;
      rejected_err_ = 0;
    }
    if (buf_.size() + data.size() > fs_.config().max_request) {
      // Keep refusing on this open file until close: the kernel may send the
      // rest of a large write as further chunks, which are no new request.
      too_big_ = true;
      const std::string reason = "request larger than " + std::to_string(fs_.config().max_request) + " bytes";
      buf_.append(data.substr(0, ErrorLog::kRequestChars));
      return Reply::error(finish_rejected(E2BIG, reason, off));
    }
    buf_.append(data);
    end_ = off + static_cast<off_t>(data.size());
    if (!complete(data)) return Reply::written(data.size());
    // A failed write leaves the reader's position where the write began.
    const int err = run(req, off + static_cast<off_t>(data.size()), off);
    return err ? Reply::error(err) : Reply::written(data.size());
  }

  Reply flush(fuse_req_t req) override {
    std::lock_guard g(mu_);
    too_big_ = false;
    if (done_ || is_blank(buf_)) return Reply::error(0);  // bash flushes before it writes
    return Reply::error(run(req, end_, end_));
  }

  Reply read(fuse_req_t req, std::size_t size, off_t off) override {
    std::lock_guard g(mu_);
    if (!done_ && !is_blank(buf_)) run(req, off, off);  // `printf 'x' >&3; read <&3`: no newline, no flush
    if (!done_) return Reply::slice(shown_, off, size);
    // A read from before the answer's place (pread at 0) gets it from the start.
    const off_t rel = off >= answer_at_ ? off - answer_at_ : off;
    return Reply::slice(answer_, rel, size);
  }

 private:
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
    const std::size_t first = buf_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return !last.empty() && last.back() == '\n' && !buf_.empty();
    if (buf_[first] == '{') return json_complete(buf_);
    if (sup::never_text(buf_)) return true;  // binary data: refused at once
    return last.size() < kSplitWrite && !last.empty() && last.back() == '\n';
  }

  /// Validates and starts the buffered request; returns 0 or the errno. The
  /// answer is served from file offset `ok_at` (started) or `err_at` (rejected). Holds mu_.
  int run(fuse_req_t req, off_t ok_at, off_t err_at) {
    Requester who = Requester::of(req);
    who.load_client();  // once per request
    sup::Result<sup::StartSpec> spec = sup::parse_request(buf_, who.cwd());
    if (!spec) return finish_rejected(to_errno(spec.error().code), spec.error().message, err_at, &who);
    if (!slot_.empty()) {
      if (!spec->name.empty() && spec->name != slot_)
        return finish_rejected(
            EINVAL, "\"name\" must be \"" + slot_ + "\" (or absent) in procs/" + slot_ + "/cmd", err_at, &who);
      spec->name = slot_;
    }
    spec->requester_sid = who.sid;
    spec->requester_client = who.client;
    // Where sbx-step finds the tree (SBX_BGID is set by the supervisor).
    spec->env.try_emplace("SBX_MOUNT", fs_.config().mountpoint);
    spec->requester_uid = who.uid;
    if (fs_.config().allow_other) spec->run_as = credentials(req, who);
    const sup::Result<sup::CommandStatus> st =
        fs_.sup().start(*spec, slot_.empty() ? sup::StartMode::new_only : sup::StartMode::reuse_slot);
    if (!st) return finish_rejected(to_errno(st.error().code), st.error().message, err_at, &who);
    fs_.node_of(*st, Kind::record_dir);  // learn its serial now
    fs_.note_action("start", st->cmd_full, st->bg_id, &*st);
    finish(st->bg_id + "\n", ok_at);
    return 0;
  }

  /// The reason (which may quote the request: a cwd, a key) and the request
  /// are shown with the request's own secrets masked, then the global ones.
  /// `who` (null: unknown) also gets a refused step in the box's steps.
  int finish_rejected(int err, const std::string& reason, off_t at, const Requester* who = nullptr) {
    const std::vector<std::string> secrets = request_secrets(buf_);
    std::string rejected = buf_;
    const std::string shown = fs_.errors().add(slot_.empty() ? "cmd" : "procs/" + slot_ + "/cmd", err,
                                               sup::mask_secrets(reason, secrets),
                                               sup::mask_secrets(buf_, secrets), slot_);
    if (who) fs_.note_refused_start(fs_.mask(sup::mask_secrets(buf_, secrets), slot_), err, shown, *who);
    finish(std::string("error: ") + errno_name(err) + ": " + shown + "\n", at);
    rejected_ = std::move(rejected);
    rejected_err_ = err;
    return err;
  }

  void finish(std::string answer, off_t at) {
    answer_ = std::move(answer);
    answer_at_ = at;
    buf_.clear();
    done_ = true;
  }

  static sup::Credentials credentials(fuse_req_t req, const Requester& who) {
    sup::Credentials c;
    c.uid = who.uid;
    c.gid = who.gid;
    gid_t groups[64];
    const int n = fuse_req_getgroups(req, 64, groups);
    if (n > 0) c.groups.assign(groups, groups + std::min(n, 64));
    return c;
  }

  Filesystem& fs_;
  const std::string slot_;
  const std::string shown_;  // what a read without a write shows
  std::mutex mu_;
  std::string buf_;             // guarded by mu_: the request being written
  bool done_ = false;           // guarded by mu_: a request completed; the next write starts anew
  bool too_big_ = false;        // guarded by mu_: refusing the rest of an oversized write
  std::string answer_;          // guarded by mu_: "<bgId>\n" or "error: ...\n"
  std::string rejected_;        // guarded by mu_: the bytes of the request last refused
  int rejected_err_ = 0;        // guarded by mu_: its errno; 0 after a start
  off_t end_ = 0;               // guarded by mu_: file offset after the last buffered write
  off_t answer_at_ = 0;         // guarded by mu_: the file offset where answer_ begins
};

}  // namespace

std::unique_ptr<Handle> open_cmd(Filesystem& fs, const Node& node) {
  if (node.kind == Kind::cmd) return std::make_unique<CmdHandle>(fs, "", kUsage);
  const sup::CommandStatus& st = *node.record;
  std::string shown = st.state == "empty" ? "" : fs.mask(st.cmd_full, st.bg_id) + "\n";
  return std::make_unique<CmdHandle>(fs, st.bg_id, std::move(shown));
}

}  // namespace fsd
