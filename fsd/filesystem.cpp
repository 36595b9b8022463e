#include "fsd/filesystem.hpp"

#include <cerrno>
#include <climits>
#include <ctime>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <fuse_log.h>

#include "fsd/client_name.hpp"
#include "fsd/files.hpp"
#include "fsd/errno_map.hpp"
#include "fsd/session_key.hpp"
#include "supervisor/clock.hpp"
#include "supervisor/log_view.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/utf8.hpp"

namespace fsd {

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Requester Requester::of(fuse_req_t req) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  Requester r;
  r.pid = ctx->pid;
  r.uid = ctx->uid;
  r.gid = ctx->gid;
  r.sid = session_key(r.pid);
  return r;
}

std::string Requester::cwd() const {
  if (pid <= 0) return "/";
  char buf[PATH_MAX];
  const std::string link = "/proc/" + std::to_string(pid) + "/cwd";
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<std::size_t>(n) >= sizeof buf) return "/";
  return std::string(buf, static_cast<std::size_t>(n));
}

std::vector<gid_t> Requester::groups() const {
  std::vector<gid_t> out;
  if (pid <= 0) return out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Groups:", 0) != 0) continue;
    std::istringstream words(line.substr(7));
    for (unsigned long g = 0; words >> g;) out.push_back(static_cast<gid_t>(g));
    break;
  }
  return out;
}

void Requester::load_client() { client = client_of(pid); }

Filesystem::Filesystem(sup::Supervisor& sup, Config cfg)
    : sup_(sup), cfg_(std::move(cfg)), readme_(make_readme(cfg_)), errors_(sup), parked_(sup), follows_(sup),
      steps_([](const std::string& message) { fuse_log(FUSE_LOG_ERR, "sbxfs: %s\n", message.c_str()); }),
      scratch_(sup, errors_, cfg_.max_request, cfg_.scratch_ttl, cfg_.allow_other) {
  work_dir_sizes_.keep_out(own_mount_);
  const std::string dir = sup_.info().state_dir + "/steps";
  sup::Result<std::unique_ptr<sup::BoxSteps>> opened = sup::BoxSteps::open(dir, cfg_.keep_steps);
  if (opened) {
    box_steps_ = std::move(opened.value());
  } else {
    // Best effort, like every write to it: the tree works without a history.
    fuse_log(FUSE_LOG_ERR, "sbxfs: the box's steps are not kept: %s\n", opened.error().message.c_str());
    box_steps_ = std::make_unique<sup::BoxSteps>(dir, cfg_.keep_steps);
  }
  ended_subscription_ = sup_.subscribe([this](const sup::Event& ev) {
    if (ev.kind == sup::Event::Kind::ended) complete_steps(ev.bg_id);
    if (ev.kind == sup::Event::Kind::removed) forget(ev.bg_id, ev.serial);
    if (ev.kind == sup::Event::Kind::started || ev.kind == sup::Event::Kind::removed) {
      ended_output_.changed(ev.bg_id);
      timespec now {};
      ::clock_gettime(CLOCK_REALTIME, &now);
      records_changed_ns_.store(static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec,
                                std::memory_order_relaxed);
    }
  });
  // A start whose step was written but whose command the last daemon never
  // let go (it died in between): nothing ran. Commands that ended while no
  // daemon ran send no event: complete their steps now (and forget those of
  // records that are gone).
  for (const std::string& id : sup_.starts_never_let_go())
    box_steps_->fail_open(id, {"ECANCELED", "the daemon stopped before the command was let go to run: nothing ran"});
  for (const std::string& id : box_steps_->open_ids()) complete_steps(id);
}

void Filesystem::complete_steps(const std::string& id) {
  // Every end comes here, on the event thread; few commands have steps, and
  // a status is 35 us of it (perf of 200 round trips).
  if (!box_steps_->has_open(id)) return;
  const std::optional<sup::CommandStatus> st = sup_.status(id, sup::CpuFigure::skip);
  if (!st) return box_steps_->drop_open(id);
  if (!st->over()) return;
  const std::optional<std::int64_t> at = sup::iso_to_ms(st->finished_at);
  box_steps_->complete_ended(st->bg_id, st->exit_code, st->signal, st->timed_out, at ? *at : sup::now_ms());
}

void Filesystem::forget(const std::string& id, std::uint64_t serial) {
  steps_.forget(id);
  std::lock_guard g(mu_);
  id_of_serial_.erase(serial);
}

void Filesystem::remember(const sup::CommandStatus& st) {
  std::lock_guard g(mu_);
  id_of_serial_.try_emplace(st.serial, st.bg_id);
}

Node Filesystem::node_of(const sup::CommandStatus& st, Kind kind) {
  remember(st);
  return Node{kind, record_ino(st.serial, kind), st};
}

std::optional<sup::CommandStatus> Filesystem::find(const std::string& id, const Requester& who) const {
  std::optional<sup::CommandStatus> st = sup_.status(id, sup::CpuFigure::skip);
  if (!st || !visible(*st, who)) return std::nullopt;
  return st;
}

sup::Result<Node> Filesystem::resolve(fuse_ino_t ino, const Requester& who) {
  if (ParamNodes::is_param_ino(ino)) return resolve_param(ino, who);
  const std::optional<InodeRef> ref = decode_ino(ino);
  if (!ref) return sup::Error{sup::Errc::not_found, "no such inode"};
  if (ref->kind == Kind::scratch) {
    if (!scratch_.stat(ino, who.uid)) return sup::Error{sup::Errc::not_found, "no such scratch file"};
    return Node{Kind::scratch, ino, std::nullopt};
  }
  if (!is_record_kind(ref->kind)) return Node{ref->kind, ino, std::nullopt};
  return resolve_record(ino, ref->kind, ref->serial, who);
}

sup::Result<Node> Filesystem::resolve_param(fuse_ino_t ino, const Requester& who) {
  std::optional<ParamNodes::Entry> e = param_nodes_.find(ino);
  if (!e) return sup::Error{sup::Errc::not_found, "no such inode"};
  sup::Result<Node> node = is_record_kind(e->kind) ? resolve_record(ino, e->kind, e->serial, who)
                                                   : sup::Result<Node>(Node{e->kind, ino, std::nullopt});
  if (node) node->params = std::move(e->params);
  return node;
}

sup::Result<Node> Filesystem::resolve_record(fuse_ino_t ino, Kind kind, std::uint64_t serial, const Requester& who) {
  std::optional<std::string> id;
  {
    std::lock_guard g(mu_);
    if (auto it = id_of_serial_.find(serial); it != id_of_serial_.end()) id = it->second;
  }
  if (!id) {
    // A serial we never handed out in this process (e.g. an inode a client
    // kept across a restart): learn the current ones once.
    const std::vector<sup::RecordEntry> all = sup_.entries();
    std::lock_guard g(mu_);
    for (const sup::RecordEntry& e : all) {
      id_of_serial_.try_emplace(e.serial, e.bg_id);
      if (e.serial == serial) id = e.bg_id;
    }
  }
  if (!id) return sup::Error{sup::Errc::not_found, "no such command"};
  std::optional<sup::CommandStatus> st = find(*id, who);
  if (!st || st->serial != serial) return sup::Error{sup::Errc::not_found, "no such command"};
  return Node{kind, ino, std::move(*st)};
}

void Filesystem::note_action(std::string kind, const std::string& summary, const std::string& id,
                             const sup::CommandStatus* st) {
  std::optional<sup::CommandStatus> looked_up;
  if (!st && !id.empty()) {
    looked_up = sup_.status(id, sup::CpuFigure::skip);  // the note shows no cpu
    if (looked_up) st = &*looked_up;
  }
  sup::BoxStep step;
  step.kind = std::move(kind);
  step.summary = mask(summary, id);
  step.bg_id = id;
  step.ok = true;
  if (st) {
    step.cwd = st->cwd;  // masked by the snapshot, like the note
    step.note = mask(st->note, id);
    step.client = st->client;
  }
  // A stop of a command that has ended already is done at once. A new run
  // of a slot: steps of an earlier run still open belong to no end to come.
  const bool until_end = (step.kind == "start" || step.kind == "stop") && st && !st->over();
  if (step.kind == "start") box_steps_->drop_open(id);
  box_steps_->add(std::move(step), until_end);
  // The end may have been announced (and the open steps completed) between
  // the look above and the add: then nothing else completes this one.
  if (until_end) complete_steps(id);
}

void Filesystem::note_refused_start(const std::string& request, sup::Errc code, const std::string& reason,
                                    const Requester& who, const std::vector<std::string>& secrets,
                                    const std::string& slot) {
  const std::optional<std::uint64_t> dropped = refused_budget_.take(who.uid);
  if (!dropped) return;  // past the user's budget: counted, told with their next one
  sup::BoxStep step;
  step.kind = "start";
  step.summary = request;
  step.bg_id = slot;  // the slot it was meant for (none for the root cmd)
  step.ok = false;
  step.error = sup::BoxStep::Refusal{
      errno_name(code), *dropped == 0 ? reason
                                      : reason + " (" + std::to_string(*dropped) +
                                            " refused requests of this user before it were not kept: more than " +
                                            std::to_string(static_cast<int>(RefusedStepBudget::kBurst)) +
                                            " at once, or one a second)"};
  step.cwd = mask(sup::mask_secrets(who.cwd(), secrets), "");
  step.client = who.client;
  box_steps_->add(std::move(step));
}

void Filesystem::note_start_failed(const std::string& id, sup::Errc code, const std::string& reason) {
  box_steps_->fail_open(id, sup::BoxStep::Refusal{errno_name(code), reason});
}

bool Filesystem::mine(const sup::CommandStatus& st, const Requester& reader) const {
  if (cfg_.allow_other && reader.uid != st.owner_uid) return false;
  // Two named clients (agents' harnesses name one per conversation): the
  // same name. Otherwise the same session; 0 is nobody's session.
  if (!reader.client.empty() && !st.client.empty()) return reader.client == st.client;
  return reader.sid != 0 && reader.sid == st.owner_sid;
}

void Filesystem::mask_json(nlohmann::json& j, const std::string& id, bool top) const {
  if (j.is_string()) {
    j = mask(j.get_ref<const std::string&>(), id);
  } else if (j.is_structured()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!(top && j.is_object() && (it.key() == "bgId" || it.key() == "logPath"))) mask_json(*it, id, false);
  }
}

nlohmann::json Filesystem::record_json(const sup::CommandStatus& st, const Requester& reader) const {
  nlohmann::json j = st.to_json();
  j["logPath"] = cfg_.mountpoint + "/procs/" + st.bg_id + "/log";
  j["mine"] = mine(st, reader);
  mask_json(j, st.bg_id);  // defence in depth: the record masks its fields already
  return j;
}

std::string Filesystem::log_tail(const sup::CommandStatus& st, std::size_t bytes) const {
  if (st.log_file.empty()) return {};
  // The log as a new reader sees it (past log_max: the latest output), a
  // little more than shown, so that a secret cut by the window's start is
  // still recognised and masked; those cut by a gap are masked there.
  const std::string dir = st.log_file.substr(0, st.log_file.rfind('/'));
  const std::vector<std::string> secrets = sup_.secrets(st.bg_id);
  const std::size_t widen = std::max<std::size_t>(1024, sup::secret_reach(secrets) + 1);
  // A running command's last bytes that may begin a secret wait for the rest.
  if (std::optional<std::string> end =
          sup::log_view_end(dir, sup::LogSelection::all, bytes + widen, secrets, sup_.secret_blind(), st.running,
                            sup::LogView::Masking::cut_parts)) {
    return std::string(sup::utf8_tail(sup::mask_secrets_end(*end, secrets, bytes), bytes));
  }
  const int fd = ::open(st.log_file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat sb {};
  std::string buf;
  if (::fstat(fd, &sb) == 0) {
    // Read a little more than we show, so a secret cut by the window's
    // start is still recognised and masked.
    const off_t want = static_cast<off_t>(bytes + 1024);
    const off_t from = sb.st_size > want ? sb.st_size - want : 0;
    buf.resize(static_cast<std::size_t>(sb.st_size - from));
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), from);
    buf.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  }
  ::close(fd);
  return std::string(sup::utf8_tail(sup_.mask(buf, st.bg_id), bytes));
}

}  // namespace fsd
