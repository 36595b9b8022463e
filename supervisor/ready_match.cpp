#include "supervisor/ready_match.hpp"

namespace sup {

using nlohmann::json;

json ReadyMatch::to_json() const {
  switch (kind) {
    case ReadyCondition::Kind::log:
      return {{"kind", "log"}, {"stream", stream}, {"text", text}, {"match", match},
              {"cursor", cursor.empty() ? json(nullptr) : json(cursor)}};
    case ReadyCondition::Kind::port: return {{"kind", "port"}, {"port", port}};
    case ReadyCondition::Kind::http: return {{"kind", "http"}, {"port", port}, {"path", path}, {"status", status}};
    case ReadyCondition::Kind::notify: return {{"kind", "notify"}};
  }
  return nullptr;
}

std::optional<ReadyMatch> ReadyMatch::from_json(const json& j) {
  if (!j.is_object() || !j.contains("kind") || !j["kind"].is_string()) return std::nullopt;
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : std::string(); };
  auto num = [&](const char* k) { return j.contains(k) && j[k].is_number_integer() ? j[k].get<int>() : 0; };
  ReadyMatch m;
  const std::string kind = j["kind"].get<std::string>();
  if (kind == "log") m.kind = ReadyCondition::Kind::log;
  else if (kind == "port") m.kind = ReadyCondition::Kind::port;
  else if (kind == "http") m.kind = ReadyCondition::Kind::http;
  else if (kind == "notify") m.kind = ReadyCondition::Kind::notify;
  else return std::nullopt;
  m.stream = str("stream");
  m.text = str("text");
  m.match = str("match");
  m.cursor = str("cursor");
  m.port = num("port");
  m.path = str("path");
  m.status = num("status");
  return m;
}

}  // namespace sup
