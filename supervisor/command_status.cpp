#include "supervisor/command_status.hpp"

namespace sup {

nlohmann::json CommandStatus::to_json() const {
  using nlohmann::json;
  json j;
  j["bgId"] = bg_id;
  j["running"] = running;
  j["state"] = state;
  j["note"] = note;
  j["cmd"] = cmd;
  j["argv"] = argv;
  j["cwd"] = cwd;
  j["client"] = client.empty() ? json(nullptr) : json(client);
  j["pid"] = pid > 0 ? json(pid) : json(nullptr);
  j["startedAt"] = started_at.empty() ? json(nullptr) : json(started_at);
  j["finishedAt"] = finished_at.empty() ? json(nullptr) : json(finished_at);
  if (over() && state != "empty") {
    j["exitCode"] = exit_code ? json(*exit_code) : json(nullptr);
    j["signal"] = signal.empty() ? json(nullptr) : json(signal);
    j["endReason"] = end_reason.empty() ? json(nullptr) : json(end_reason);
    j["timedOut"] = timed_out;
    if (!end_note.empty()) j["endNote"] = end_note;
  }
  if (output_lost > 0) j["outputLost"] = output_lost;
  if (state != "empty") {
    j["truncated"] = truncated;
    j["droppedBytes"] = dropped_bytes;
  }
  j["cpu"] = cpu;
  if (!tracking.empty()) j["tracking"] = tracking;
  if (!cgroup.empty()) j["cgroup"] = cgroup;
  if (!ready_when.empty()) {
    j["ready"] = ready;
    j["readyAt"] = ready_at.empty() ? json(nullptr) : json(ready_at);
    j["readyWhen"] = ready_when;
  }
  if (state != "empty") {
    if (restart != "no") j["restart"] = restart;
    j["restarts"] = restarts;
    if (!restart_at.empty()) j["restartAt"] = restart_at;
  }
  if (error) j["error"] = {{"code", error_code_name(error->code)}, {"message", error->message}};
  return j;
}

}  // namespace sup
