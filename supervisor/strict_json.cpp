#include "supervisor/strict_json.hpp"

#include <set>
#include <vector>

namespace sup {

nlohmann::json parse_json_keys_once(std::string_view text, std::string* twice) {
  using nlohmann::json;
  std::vector<std::set<std::string>> keys;  // of each object being read
  const json::parser_callback_t note_keys = [&](int, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (ev == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == json::parse_event_t::key && twice->empty() && !keys.empty() && parsed.is_string() &&
               !keys.back().insert(parsed.get<std::string>()).second) {
      *twice = parsed.get<std::string>();
    }
    return true;
  };
  return json::parse(text.begin(), text.end(), note_keys, /*allow_exceptions=*/false);
}

}  // namespace sup
