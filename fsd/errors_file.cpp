// `errors`: the latest rejected requests, one JSON object per line, newest last.
#include <chrono>
#include <ctime>

#include <fuse_log.h>
#include <nlohmann/json.hpp>

#include "fsd/errno_map.hpp"
#include "fsd/error_log.hpp"
#include "fsd/files.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

namespace {

std::string iso_now() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t t = system_clock::to_time_t(now);
  const auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms));
  return out;
}

/// `text` masked, then cut to about `max` bytes by dropping its middle: a
/// reason that quotes a long cwd still ends in why it failed.
std::string shown(const sup::Supervisor& sup, std::string_view text, const std::string& id, std::size_t max) {
  std::string out = sup.mask(text, id);
  if (out.size() <= max) return out;
  auto boundary = [&](std::size_t at) {  // never inside a UTF-8 character
    while (at > 0 && (static_cast<unsigned char>(out[at]) & 0xC0) == 0x80) --at;
    return at;
  };
  const std::size_t head = boundary(max / 2), tail = boundary(out.size() - max / 2);
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
      {"at", iso_now()}, {"path", sup_.mask(path, id)}, {"errno", errno_name(err)}, {"error", why}, {"request", req},
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
