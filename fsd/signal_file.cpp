// procs/ID/signal: write `15`, `TERM` or `SIGTERM` (case-insensitive, blanks
// trimmed): the signal goes to the whole tree. EINVAL for an unknown signal,
// ESRCH once the command has ended.
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include "fsd/errno_map.hpp"
#include "fsd/files.hpp"

namespace fsd {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

class SignalHandle : public Handle {
 public:
  SignalHandle(Filesystem& fs, std::string id) : fs_(fs), id_(std::move(id)) {}

  Reply write(fuse_req_t, std::string_view data, off_t) override {
    const std::string path = "procs/" + id_ + "/signal";
    const int sig = parse_signal(data);
    if (sig == 0) {
      fs_.errors().add(path, EINVAL, "unknown signal (write a number, TERM or SIGTERM)", data, id_);
      return Reply::error(EINVAL);
    }
    const sup::Status st = fs_.sup().signal(id_, sig);
    if (!st) {
      fs_.errors().add(path, to_errno(st.error().code), st.error().message, data, id_);
      return Reply::fail(st.error());
    }
    const std::optional<sup::CommandStatus> rec = fs_.sup().status(id_);
    const char* abbrev = sigabbrev_np(sig);
    const std::string name = abbrev ? std::string("SIG") + abbrev : std::to_string(sig);
    fs_.note_action("signal", name + (rec ? " " + rec->cmd_full : ""), id_, rec ? &*rec : nullptr);
    return Reply::written(data.size());
  }

 private:
  Filesystem& fs_;
  const std::string id_;
};

}  // namespace

int parse_signal(std::string_view text) {
  const std::string_view s = trim(text);
  if (s.empty()) return 0;
  if (std::isdigit(static_cast<unsigned char>(s.front()))) {
    int n = 0;
    for (char c : s) {
      if (!std::isdigit(static_cast<unsigned char>(c)) || n > SIGRTMAX) return 0;
      n = n * 10 + (c - '0');
    }
    return n >= 1 && n <= SIGRTMAX ? n : 0;
  }
  std::string name;
  for (char c : s) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  for (int sig = 1; sig < NSIG; ++sig) {
    const char* abbrev = sigabbrev_np(sig);  // "TERM"; glibc >= 2.32
    if (abbrev && name == abbrev) return sig;
  }
  return 0;
}

std::unique_ptr<Handle> open_signal(Filesystem& fs, const Node& node) {
  return std::make_unique<SignalHandle>(fs, node.id());
}

}  // namespace fsd
