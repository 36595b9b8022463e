#pragma once
// The handle of a file of procs/ID/ that acts on its command: the
// filesystem, the command's id, the file's path as `errors` names it, and
// whose record it was opened on.
#include <sys/types.h>

#include <optional>
#include <string>

#include "fsd/filesystem.hpp"
#include "fsd/handle.hpp"

namespace fsd {

class RecordHandle : public Handle {
 protected:
  /// `file`: the name in procs/ID/ ("signal", "steps"...).
  RecordHandle(Filesystem& fs, const Node& node, const char* file)
      : fs_(fs), id_(node.id()), path_("procs/" + id_ + "/" + file),
        owner_(node.record ? node.record->owner_uid : static_cast<uid_t>(-1)) {}

  /// ENOENT when the record this file was opened on was removed and the
  /// name is another user's record now (an rmdir, then theirs): nothing
  /// reaches that one through this file. The same user's next record of the
  /// name (a slot run again) is still this file's, as for the log.
  std::optional<Reply> removed_since_open() const {
    const std::optional<uid_t> now = fs_.sup().owner_of(id_);
    if (!now || *now == owner_) return std::nullopt;
    return removed();
  }
  /// That ENOENT, for a caller that has the record's status already.
  static Reply removed() { return Reply::fail({sup::Errc::not_found, "the command this file was opened on was removed"}); }

  Filesystem& fs_;
  const std::string id_;
  const std::string path_;
  const uid_t owner_;
};

}  // namespace fsd
