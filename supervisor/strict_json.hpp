#pragma once
// JSON as requests are read: a key given twice in one object is told, not
// silently taken at its last value (what the library does).
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace sup {

/// `text` parsed (discarded when it is not JSON); `*twice` gets the first
/// key given twice in one object, or stays empty.
nlohmann::json parse_json_keys_once(std::string_view text, std::string* twice);

}  // namespace sup
