#include "supervisor/record_files.hpp"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "supervisor/files.hpp"

namespace sup {

using nlohmann::json;

Result<ExitInfo> parse_exit(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{Errc::io_error, "exit.json is corrupt"};
  try {
    ExitInfo e;
    if (j.contains("exitCode") && !j["exitCode"].is_null()) e.exit_code = j["exitCode"].get<int>();
    if (j.contains("signal") && j["signal"].is_string()) e.signal = j["signal"].get<std::string>();
    e.end_reason = j.at("endReason").get<std::string>();
    e.finished_at = j.value("finishedAt", "");
    e.timed_out = j.value("timedOut", false);
    e.end_note = j.value("endNote", "");
    e.output_lost = j.value("outputLost", std::uint64_t{0});
    return e;
  } catch (const json::exception& ex) {
    return Error{Errc::io_error, std::string("exit.json is corrupt: ") + ex.what()};
  }
}

Result<MonitorInfo> parse_monitor(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{Errc::io_error, "monitor.json is corrupt"};
  try {
    MonitorInfo m;
    m.monitor_pid = j.at("monitorPid").get<pid_t>();
    m.monitor_start = j.at("monitorStart").get<std::uint64_t>();
    m.pid = j.at("pid").get<pid_t>();
    m.pid_start = j.at("pidStart").get<std::uint64_t>();
    m.started_at = j.value("startedAt", "");
    m.cgroup = j.value("cgroup", "");
    return m;
  } catch (const json::exception& ex) {
    return Error{Errc::io_error, std::string("monitor.json is corrupt: ") + ex.what()};
  }
}

bool is_legacy_staging(const std::string& procs_dir, const std::string& name) {
  if (name.rfind(".new-", 0) != 0 && name.rfind(".del-", 0) != 0) return false;
  const std::string dir = procs_dir + "/" + name;
  struct stat st {};
  if (::stat((dir + "/slot").c_str(), &st) == 0) return false;
  auto spec = read_file(dir + "/spec.json");
  if (!spec.ok() || !spec.value()) return true;  // no record without a spec or a slot
  const json j = json::parse(*spec.value(), nullptr, false);
  return !(j.is_object() && j.contains("bgId") && j["bgId"].is_string() && j["bgId"].get<std::string>() == name);
}

}  // namespace sup
