#include "supervisor/slot_record.hpp"

#include <nlohmann/json.hpp>

namespace sup {

using nlohmann::json;

std::string format_slot(const SlotOwner& o) {
  json j = {{"ownerUid", o.uid}, {"ownerSid", o.sid}};
  return j.dump() + "\n";
}

SlotOwner parse_slot(const std::string& text) {
  SlotOwner o;
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return o;
  try {
    o.uid = j.value("ownerUid", 0u);
    o.sid = j.value("ownerSid", 0);
  } catch (const json::exception&) {
    return SlotOwner{};  // a wrong type: no owner known
  }
  return o;
}

}  // namespace sup
