// `errors`: the latest rejected requests, one JSON object per line, newest last.

#include <fuse_log.h>
#include <nlohmann/json.hpp>

#include "fsd/errno_map.hpp"
#include "fsd/error_log.hpp"
#include "fsd/files.hpp"
#include "supervisor/clock.hpp"
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
  lines_.push_back(std::move(line));
  while (lines_.size() > kCapacity) lines_.pop_front();
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
