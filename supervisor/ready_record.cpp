#include "supervisor/ready_record.hpp"

#include <nlohmann/json.hpp>

namespace sup {

using nlohmann::json;

std::string format_ready(const ReadyRecord& r) {
  json j = {{"condition", r.condition ? r.condition->to_json() : json(nullptr)},
            {"ready", r.ready},
            {"readyAt", r.ready_at.empty() ? json(nullptr) : json(r.ready_at)}};
  if (r.matched) j["matched"] = r.matched->to_json();
  if (r.settled) j["settled"] = true;
  return j.dump() + "\n";
}

std::optional<ReadyRecord> parse_ready(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  ReadyRecord r;
  if (j.contains("condition") && j["condition"].is_object())
    if (auto c = ready_condition_from_json(j["condition"]); c && c.value()) r.condition = *c.value();
  if (j.contains("matched")) r.matched = ReadyMatch::from_json(j["matched"]);
  const json& ready = j.contains("ready") ? j["ready"] : json(false);
  r.ready = ready.is_boolean() && ready.get<bool>();
  if (j.contains("readyAt") && j["readyAt"].is_string()) r.ready_at = j["readyAt"].get<std::string>();
  r.settled = j.contains("settled") && j["settled"].is_boolean() && j["settled"].get<bool>();
  return r;
}

}  // namespace sup
