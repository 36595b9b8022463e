// procs/ID/output: the command's output in one read. Blocks like `wait`
// (parked, the same cap and interrupts), then answers
//   {"stdout": "...", "stderr": "...", "exitCode": N, "signal": null,
//    "timedOut": false, "truncated": false, "durationMs": N, ...}
// Each stream is the end of procs/ID/stdout or stderr, at most output_max
// bytes (a cut stream keeps its end: what a failing command printed last),
// secrets masked. Bytes that are not valid UTF-8 become the four characters
// \xHH (uppercase hex) and are counted in escapedBytes: never dropped.
//
// `output,timeoutSec=N` caps this read alone; `output,maxBytes=N` caps each
// stream at N bytes in place of output_max (0: no cap, up to log_max).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsd/blocking_read.hpp"
#include "supervisor/clock.hpp"
#include "fsd/files.hpp"
#include "fsd/json_object_writer.hpp"
#include "supervisor/log_index.hpp"
#include "supervisor/log_view.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/utf8.hpp"

namespace fsd {

namespace {

struct Stream {
  std::string bytes;
  bool truncated = false;
  std::uint64_t size = 0;  ///< the whole file's size
};

/// A cut may fall inside a UTF-8 character: start at the next one.
void skip_partial_char(std::string& bytes) {
  std::size_t skip = 0;
  while (skip < 3 && skip < bytes.size() && (static_cast<unsigned char>(bytes[skip]) & 0xC0) == 0x80) ++skip;
  bytes.erase(0, skip);
}

/// read_end() once; `ino`: the inode read (0: none).
Stream read_end_once(const std::string& path, std::size_t cap, ino_t* ino) {
  Stream s;
  if (path.empty()) return s;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return s;
  struct stat st {};
  if (::fstat(fd, &st) == 0) {
    *ino = st.st_ino;
    s.size = static_cast<std::uint64_t>(st.st_size);
    const off_t from = s.size > cap ? static_cast<off_t>(s.size - cap) : 0;
    s.truncated = from > 0;
    s.bytes.resize(static_cast<std::size_t>(s.size - static_cast<std::uint64_t>(from)));
    std::size_t got = 0;
    while (got < s.bytes.size()) {
      const ssize_t n = ::pread(fd, s.bytes.data() + got, s.bytes.size() - got, from + static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    s.bytes.resize(got);
    if (s.truncated) skip_partial_char(s.bytes);
  }
  ::close(fd);
  return s;
}

/// The last `cap` bytes of the stream whose file would be `path`, from the
/// log's index as a new reader of the stream sees it (past log_max: the
/// latest output); nullopt when the record has none (an older build's).
std::optional<Stream> read_end_indexed(const std::string& path, std::size_t cap, const std::vector<std::string>& secrets,
                                       std::size_t blind) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  const sup::LogSelection which = path.ends_with("/stderr") ? sup::LogSelection::err : sup::LogSelection::out;
  Stream s;
  bool gap = false;
  // Whole secrets are masked by the caller ("****"); those cut by a gap here.
  // (A running command's last bytes that may begin a secret: held back by the caller, for every record.)
  std::optional<std::string> end = sup::log_view_end(path.substr(0, slash), which, cap, secrets, blind, false,
                                                     sup::LogView::Masking::cut_parts, &s.size, &gap);
  if (!end) return std::nullopt;
  s.bytes = std::move(*end);
  s.truncated = s.size > cap || gap;
  if (s.size > cap) skip_partial_char(s.bytes);
  return s;
}

/// The last `cap` bytes of `path` (an empty stream when it cannot be read).
Stream read_end(const std::string& path, std::size_t cap, const std::vector<std::string>& secrets, std::size_t blind) {
  if (std::optional<Stream> indexed = read_end_indexed(path, cap, secrets, blind)) return *indexed;
  Stream s;
  for (int attempt = 0; attempt < 3; ++attempt) {
    ino_t ino = 0;
    s = read_end_once(path, cap, &ino);
    // A stream that began as a second name of the log gets a file of its
    // own when the other stream writes (relay.cpp): bytes read from the old
    // name may be the other stream's, so read the new one (once per record).
    struct stat now {};
    if (ino == 0 || ::stat(path.c_str(), &now) != 0 || now.st_ino == ino) break;
  }
  return s;
}


class OutputHandle : public BlockingReadHandle {
 public:
  OutputHandle(Filesystem& fs, const Node& node, Requester reader)
      : BlockingReadHandle(fs, node, reader, ParkedRequests::Until::ended), cap_(stream_cap(fs, node)) {}

 private:
  // Up to twice output_max read, escaped and dumped: not on the event thread.
  ParkedRequests::Cost cost() const override { return ParkedRequests::Cost::heavy; }
  bool shows_cpu() const override { return false; }
  const std::size_t cap_;  // bytes of each stream

  static std::size_t stream_cap(const Filesystem& fs, const Node& node) {
    const std::optional<std::int64_t> max = node.keys().number("maxBytes");
    if (!max) return fs.config().output_max;
    if (*max > 0) return static_cast<std::size_t>(*max);
    return fs.config().log_max > 0 ? static_cast<std::size_t>(fs.config().log_max) : SIZE_MAX;
  }

  std::string build(const sup::CommandStatus& st, ParkedRequests::Outcome why) override {
    const std::size_t cap = cap_;
    const std::vector<std::string> secrets = fs_.sup().secrets(st.bg_id);
    const std::size_t blind = fs_.sup().secret_blind();
    // Read wider by the longest secret, so that one the cap cuts is still
    // found; mask_secrets_end cuts to the cap and shows what of it is
    // left as "****".
    const std::size_t widen = secrets.empty() ? 0 : sup::secret_reach(secrets) + 1;
    const std::size_t read_cap = cap > SIZE_MAX - widen ? SIZE_MAX : cap + widen;
    Stream out = read_end(st.stdout_file, read_cap, secrets, blind);
    Stream err = read_end(st.stderr_file, read_cap, secrets, blind);
    for (Stream* s : {&out, &err}) {
      // Still running: its last bytes that may begin a secret wait for the rest.
      if (st.running) s->bytes.resize(s->bytes.size() - sup::secret_start_at_end(s->bytes, secrets, blind));
      if (!secrets.empty()) s->bytes = sup::mask_secrets_end(s->bytes, secrets, cap);
      s->truncated = s->truncated || s->size > cap;
    }
    // The two texts (up to output_max each) are quoted once, each into a
    // buffer of its size, and put in place in one more copy: through
    // nlohmann::json they were escaped twice, and growing buffers and
    // replacing in place copied each several times, into fresh pages (page
    // faults), most of the daemon's CPU when many large answers are due.
    std::string out_text, err_text;
    out_text.reserve(out.bytes.size() + 2);
    err_text.reserve(err.bytes.size() + 2);
    const std::size_t out_escaped = JsonObjectWriter::quote_hex_escaped(out_text, out.bytes);
    const std::size_t err_escaped = JsonObjectWriter::quote_hex_escaped(err_text, err.bytes);
    nlohmann::json j;
    j["stdout"] = "";
    j["stderr"] = "";
    j["exitCode"] = st.exit_code ? nlohmann::json(*st.exit_code) : nlohmann::json(nullptr);
    j["signal"] = st.signal.empty() ? nlohmann::json(nullptr) : nlohmann::json(st.signal);
    j["timedOut"] = st.timed_out;
    j["truncated"] = out.truncated || err.truncated;
    const std::optional<std::int64_t> start = sup::iso_to_ms(st.started_at);
    const std::optional<std::int64_t> end = st.running ? sup::now_ms() : sup::iso_to_ms(st.finished_at);
    j["durationMs"] = start && end ? nlohmann::json(std::max<std::int64_t>(0, *end - *start)) : nlohmann::json(nullptr);
    j["bgId"] = st.bg_id;
    j["state"] = st.state;
    j["stillRunning"] = why == ParkedRequests::Outcome::capped && st.running;
    j["stdoutBytes"] = out.size;
    j["stderrBytes"] = err.size;
    j["stdoutTruncated"] = out.truncated;
    j["stderrTruncated"] = err.truncated;
    j["escapedBytes"] = {{"stdout", out_escaped}, {"stderr", err_escaped}};
    return with_texts(dump_json(j), {{"\"stderr\": \"\"", &err_text}, {"\"stdout\": \"\"", &out_text}});
  }

  struct Text {
    std::string_view field;     ///< `"KEY": ""`: its first place (no other value of the answer can hold it)
    const std::string* quoted;  ///< what replaces its empty string
  };

  /// `skeleton` with the empty string of each field replaced by its text,
  /// in one buffer of the final size.
  static std::string with_texts(const std::string& skeleton, std::initializer_list<Text> texts) {
    std::vector<std::pair<std::size_t, const std::string*>> at;  // where each empty string begins
    std::size_t size = skeleton.size();
    for (const Text& t : texts) {
      const std::size_t pos = skeleton.find(t.field);
      if (pos == std::string::npos) continue;
      at.emplace_back(pos + t.field.size() - 2, t.quoted);
      size += t.quoted->size() - 2;
    }
    std::sort(at.begin(), at.end());
    std::string text;
    text.reserve(size);
    std::size_t from = 0;
    for (const auto& [pos, quoted] : at) {
      text.append(skeleton, from, pos - from);
      text += *quoted;
      from = pos + 2;
    }
    text.append(skeleton, from);
    return text;
  }
};

}  // namespace

std::unique_ptr<Handle> open_output(Filesystem& fs, const Node& node, const OpenRequest& req) {
  const Requester& reader = req.who;
  return std::make_unique<OutputHandle>(fs, node, reader);
}

}  // namespace fsd
