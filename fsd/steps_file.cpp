// procs/ID/steps and procs/ID/steps.json: the steps inside a command.
// sbx-step (tools/sbx-step), run inside a supervised command, writes lines
//   start NAME          a step begins (now)
//   end [EXITCODE]      the latest step still running ends (now)
// to procs/$SBX_BGID/steps under $SBX_MOUNT; steps.json lists them in order:
// [{"name", "startedAt", "ms", "exitCode", "running"}]. A bad line is EINVAL
// (and goes to `errors`); lines before it in the same write are kept.
#include <cerrno>
#include <mutex>

#include "fsd/files.hpp"
#include "fsd/record_handle.hpp"

namespace fsd {

namespace {

class StepsHandle : public RecordHandle {
 public:
  StepsHandle(Filesystem& fs, const Node& node) : RecordHandle(fs, node, "steps") {}

  // Whole lines are applied in the write that completes them; a last line
  // without "\n" at flush.
  Reply write(fuse_req_t, std::string_view data, off_t) override {
    std::lock_guard g(mu_);
    buf_.append(data);
    const std::size_t nl = buf_.rfind('\n');
    if (nl == std::string::npos) {
      if (buf_.size() > 64 * 1024) return fail("line too long", data);
      return Reply::written(data.size());
    }
    const std::string lines = buf_.substr(0, nl + 1);
    buf_.erase(0, nl + 1);
    if (Reply r = apply(lines); r.err()) return r;
    return Reply::written(data.size());
  }

  Reply flush(fuse_req_t) override {
    std::lock_guard g(mu_);
    if (buf_.empty()) return Reply::error(0);
    const std::string line = std::move(buf_);
    buf_.clear();
    return apply(line);
  }

 private:
  /// Holds mu_; success or the refusal.
  Reply apply(const std::string& lines) {
    std::optional<sup::CommandStatus> st = fs_.sup().status(id_);
    if (st && st->running && st->restart != "no" && !st->restart.empty()) {
      // Under a restart policy the run asking may be newer than our news of
      // it (published before it runs; the news, a rename, read later).
      fs_.sup().notice_run(id_);
      st = fs_.sup().status(id_);
    }
    if (!st) return Reply::error(ENOENT);
    if (!opened_.ours(*st)) return removed();
    const sup::Status ok = fs_.steps().apply(*st, lines);
    if (!ok) {
      fs_.errors().add(path_, ok.error().code, ok.error().message, lines, id_);
      return Reply::fail(ok.error());
    }
    return Reply::error(0);
  }

  Reply fail(const std::string& why, std::string_view data) {
    fs_.errors().add(path_, EINVAL, why, data, id_);
    buf_.clear();
    return Reply::error(EINVAL);
  }

  std::mutex mu_;
  std::string buf_;  // guarded by mu_: an unfinished line
};

}  // namespace

std::unique_ptr<Handle> open_steps(Filesystem& fs, const Node& node, const OpenRequest&) {
  return std::make_unique<StepsHandle>(fs, node);
}

std::unique_ptr<Handle> open_steps_json(Filesystem& fs, const Node& node, const OpenRequest&) {
  // Step names come from inside the command, which knows its secrets.
  nlohmann::json steps = fs.steps().to_json(*node.record);
  fs.mask_json(steps, node.record->bg_id);
  return std::make_unique<SnapshotHandle>(dump_json(steps));
}

}  // namespace fsd
