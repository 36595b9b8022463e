// A record as the value callers get: CommandStatus.
#include "supervisor/supervisor_impl.hpp"

#include "supervisor/log_limit.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/utf8.hpp"

namespace sup {

namespace {

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-./=:,+@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace

CommandStatus Supervisor::Impl::snapshot(const Record& r) const {
  CommandStatus s;
  s.bg_id = r.id;
  s.serial = r.serial;
  s.owner_uid = r.owner_uid;
  s.owner_sid = r.owner_sid;
  if (r.spec) s.client = r.spec->requester_client;
  std::string dir = dir_of(r.id);
  s.log_file = dir + "/log";
  s.stdout_file = dir + "/stdout";
  s.stderr_file = dir + "/stderr";
  const CommandState shown = shown_state(r);
  s.state = state_name(shown);
  s.running = is_running(shown);
  if (r.error) s.error = r.error;
  if (shown == CommandState::empty) s.named = true;
  if (r.spec) {
    auto secrets = secrets_of(&r);
    const StartSpec& sp = *r.spec;
    s.named = !sp.name.empty();
    s.note = mask_secrets(sp.note, secrets);
    std::string full;
    if (sp.shell) {
      full = *sp.shell;
    } else {
      for (auto& a : sp.argv) full += (full.empty() ? "" : " ") + shell_quote(a);
    }
    s.cmd_full = mask_secrets(full, secrets);
    s.cmd = std::string(utf8_head(s.cmd_full, s.cmd_full.size(), 120));  // characters, not bytes
    for (auto& a : sp.effective_argv()) s.argv.push_back(mask_secrets(a, secrets));
    s.cwd = mask_secrets(sp.cwd, secrets);
    s.work_dir = sp.cwd;
  }
  s.restart = restart_policy_name(r.spec ? r.spec->restart : RestartPolicy::no);
  s.restarts = r.monitor.restarts;
  if (shown == CommandState::restarting) s.restart_at = r.monitor.restart_at;
  s.queued = shown == CommandState::queued;
  if (s.queued) s.queue_seq = r.queue_seq;
  s.log_owner = r.monitor.monitor_start;
  s.pid = r.monitor.pid;
  s.started_at = r.monitor.started_at;
  if (r.monitor.monitor_pid > 0) s.tracking = r.monitor.cgroup.empty() ? "proctree" : "cgroup";
  s.cgroup = r.monitor.cgroup;
  if (has_ended(r.state)) {
    s.exit_code = r.exit.exit_code;
    s.signal = r.exit.signal;
    s.end_reason = r.exit.end_reason;
    s.finished_at = r.exit.finished_at;
    s.timed_out = r.exit.timed_out;
    s.end_note = r.exit.end_note;
    s.output_lost = r.exit.output_lost;
  }
  if (r.truncated) {
    s.truncated = true;
    s.dropped_bytes = has_ended(r.state) ? r.dropped : dropped_bytes(dir).value_or(0);
  }
  if (r.ready_cond) {
    s.ready_when = mask_secrets(r.ready_cond->describe(), secrets_of(&r));
    s.ready = r.ready;
    s.ready_at = r.ready_at;
    s.ready_cond = r.ready_cond;
    s.ready_match = r.ready_match;
  }
  return s;
}

}  // namespace sup
