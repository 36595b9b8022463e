// `errors`: the latest rejected requests, one JSON object per line, newest last.

#include <fcntl.h>

#include <fuse_log.h>
#include <nlohmann/json.hpp>

#include "fsd/errno_map.hpp"
#include "fsd/error_log.hpp"
#include "fsd/files.hpp"
#include "supervisor/atomic_write.hpp"
#include "supervisor/clock.hpp"
#include "supervisor/files.hpp"
#include "supervisor/supervisor.hpp"
#include "supervisor/utf8.hpp"

namespace fsd {

namespace {

/// `text` masked, then cut to about `max` bytes by dropping its middle: a
/// reason that quotes a long cwd still ends in why it failed.
std::string shown(const sup::Supervisor& sup, std::string_view text, const std::string& id, std::size_t max) {
  std::string out = sup.mask(text, id);
  if (out.size() <= max) return out;
  const std::size_t head = sup::utf8_head(out, max / 2).size();
  const std::size_t tail = sup::utf8_head(out, out.size() - max / 2).size();
  return out.substr(0, head) + " [...] " + out.substr(tail);
}

}  // namespace

ErrorLog::ErrorLog(const sup::Supervisor& sup) : sup_(sup), path_(sup.info().state_dir + "/errors") {
  bool torn = false;
  if (auto text = sup::read_file(path_); text.ok() && text.value()) {
    std::string_view rest = *text.value();
    while (!rest.empty()) {
      const std::size_t nl = rest.find('\n');
      if (nl == std::string_view::npos) {
        torn = true;  // a last line cut by a crash in its write: the next would join it
        break;
      }
      if (nl > 0) lines_.emplace_back(rest.substr(0, nl));
      rest.remove_prefix(nl + 1);
      ++in_file_;
    }
    while (lines_.size() > kCapacity) lines_.pop_front();
  }
  if (!torn || !rewrite()) file_.reset(::open(path_.c_str(), kAppend, 0600));
}

bool ErrorLog::rewrite() {
  std::string all;
  for (const std::string& l : lines_) all += l + "\n";
  if (!sup::write_file_atomic(path_, all)) return false;
  // Renamed over the old file, which the descriptor would go on appending to.
  file_.reset(::open(path_.c_str(), kAppend, 0600));
  in_file_ = lines_.size();
  return true;
}

void ErrorLog::keep(const std::string& line) {
  if (in_file_ + 1 >= 2 * kCapacity) {
    (void)rewrite();  // lines_ holds `line` already
    return;
  }
  const std::string text = line + "\n";
  if (file_ && sup::write_all(file_.get(), text.data(), text.size()) == 0) ++in_file_;
}

std::string ErrorLog::add(std::string_view path, sup::Errc code, std::string_view reason, std::string_view request,
                          const std::string& id) {
  return add(path, to_errno(code), reason, request, id);
}

std::string ErrorLog::add(std::string_view path, int err, std::string_view reason, std::string_view request,
                          const std::string& id) {
  std::string why = shown(sup_, reason, id, kReasonChars);
  std::string req = sup_.mask(request, id);
  if (req.size() > kRequestChars) req.resize(kRequestChars);
  const nlohmann::json j = {
      {"at", sup::iso_now()}, {"path", sup_.mask(path, id)}, {"errno", errno_name(err)}, {"error", why}, {"request", req},
  };
  std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  fuse_log(FUSE_LOG_NOTICE, "sbxfs: rejected %s\n", line.c_str());
  std::lock_guard g(mu_);
  lines_.push_back(line);
  while (lines_.size() > kCapacity) lines_.pop_front();
  keep(line);
  return why;
}

std::string ErrorLog::text() const {
  std::lock_guard g(mu_);
  std::string out;
  for (const std::string& l : lines_) out += l + "\n";
  return out;
}

std::unique_ptr<Handle> open_errors(Filesystem& fs, const Node&, const OpenRequest&) {
  return std::make_unique<SnapshotHandle>(fs.errors().text());
}

}  // namespace fsd
