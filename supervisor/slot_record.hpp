#pragma once
// slot, the file that makes a record's folder an empty named slot
// (FORMAT.md): its one writer and its one reader.
#include <sys/types.h>

#include <string>

namespace sup {

inline constexpr const char* kSlotFile = "slot";

struct SlotOwner {
  uid_t uid = 0;  ///< who made it
  pid_t sid = 0;  ///< their session
};

/// The file's text, one line.
std::string format_slot(const SlotOwner& o);
/// The owner; 0 and 0 for a file that does not parse (it is a slot all the same).
SlotOwner parse_slot(const std::string& text);

}  // namespace sup
