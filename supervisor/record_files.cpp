#include "supervisor/record_files.hpp"

#include <nlohmann/json.hpp>

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
    return m;
  } catch (const json::exception& ex) {
    return Error{Errc::io_error, std::string("monitor.json is corrupt: ") + ex.what()};
  }
}

}  // namespace sup
