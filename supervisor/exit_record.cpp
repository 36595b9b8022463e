#include "supervisor/exit_record.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "supervisor/json_text.hpp"
#include "supervisor/signal_names.hpp"

namespace sup {

using nlohmann::json;

std::string format_exit(const ExitInfo& e) {
  std::string out = "{\"exitCode\": " + std::to_string(e.exit_code.value_or(-1));
  out += ", \"signal\": " + (e.signal.empty() ? std::string("null") : json_quote(e.signal));
  out += ", \"endReason\": " + json_quote(e.end_reason);
  out += ", \"timedOut\": ";
  out += e.timed_out ? "true" : "false";
  out += ", \"finishedAt\": " + json_quote(e.finished_at);
  out += ", \"oom\": ";
  out += e.oom ? "true" : "false";
  out += ", \"outputLost\": " + std::to_string(e.output_lost);
  if (!e.end_note.empty()) out += ", \"endNote\": " + json_quote(e.end_note);
  out += "}\n";
  return out;
}

Result<ExitInfo> parse_exit(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Error{Errc::io_error, "exit.json is corrupt"};
  try {
    ExitInfo e;
    if (j.contains("exitCode") && !j["exitCode"].is_null()) e.exit_code = j["exitCode"].get<int>();
    if (j.contains("signal") && j["signal"].is_string()) {
      e.signal = j["signal"].get<std::string>();
      if (auto sig = parse_signal(e.signal)) e.signal = signal_name(*sig);
    }
    e.end_reason = j.at("endReason").get<std::string>();
    e.finished_at = j.value("finishedAt", "");
    e.timed_out = j.value("timedOut", false);
    e.oom = j.value("oom", false);
    e.end_note = j.value("endNote", "");
    e.output_lost = j.value("outputLost", std::uint64_t{0});
    return e;
  } catch (const json::exception& ex) {
    return Error{Errc::io_error, std::string("exit.json is corrupt: ") + ex.what()};
  }
}

}  // namespace sup
