#pragma once
// Whose record a file of procs/ID/ was opened on. Once that record is
// removed and another user makes one of the same name, nothing of the new
// one is read or reached through the file (ENOENT, or nothing to read);
// the same user's next record of the name still is (a slot run again).
#include <sys/types.h>

#include <optional>
#include <string>

#include "supervisor/supervisor.hpp"

namespace fsd {

class OpenedOn {
 public:
  explicit OpenedOn(uid_t owner) : owner_(owner) {}
  /// The record a lookup resolved (none: no owner matches any record).
  explicit OpenedOn(const std::optional<sup::CommandStatus>& record)
      : owner_(record ? record->owner_uid : static_cast<uid_t>(-1)) {}

  /// `st` is the same user's record.
  bool ours(const sup::CommandStatus& st) const { return st.owner_uid == owner_; }
  /// Another user's record has the name `id` now (no record: not taken).
  bool taken(const sup::Supervisor& sup, const std::string& id) const {
    const std::optional<uid_t> now = sup.owner_of(id);
    return now && *now != owner_;
  }
  /// What such a file answers a write or a blocking read.
  static sup::Error gone() { return {sup::Errc::not_found, "the command this file was opened on was removed"}; }

 private:
  uid_t owner_;
};

}  // namespace fsd
