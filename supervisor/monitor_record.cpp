#include "supervisor/monitor_record.hpp"

#include <nlohmann/json.hpp>

#include "supervisor/json_text.hpp"

namespace sup {

using nlohmann::json;

std::string format_monitor(const MonitorInfo& m) {
  return "{\"monitorPid\": " + std::to_string(m.monitor_pid) + ", \"monitorStart\": " +
         std::to_string(m.monitor_start) + ", \"pid\": " + std::to_string(m.pid) +
         ", \"pidStart\": " + std::to_string(m.pid_start) + ", \"startedAt\": " + json_quote(m.started_at) +
         (m.cgroup.empty() ? "" : ", \"cgroup\": " + json_quote(m.cgroup)) +
         (m.restarts == 0 ? "" : ", \"restarts\": " + std::to_string(m.restarts)) +
         (m.restart_at.empty() ? "" : ", \"restartAt\": " + json_quote(m.restart_at)) + "}\n";
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
    m.restarts = j.value("restarts", std::uint64_t{0});
    m.restart_at = j.value("restartAt", "");
    return m;
  } catch (const json::exception& ex) {
    return Error{Errc::io_error, std::string("monitor.json is corrupt: ") + ex.what()};
  }
}

}  // namespace sup
