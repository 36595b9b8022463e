#include "supervisor/legacy_staging.hpp"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "supervisor/files.hpp"

namespace sup {

bool is_legacy_staging(const std::string& procs_dir, const std::string& name) {
  using nlohmann::json;
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
