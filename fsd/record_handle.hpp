#pragma once
// The handle of a file of procs/ID/ that acts on its command: the
// filesystem, the command's id, the file's path as `errors` names it, and
// whose record it was opened on.
#include <sys/types.h>

#include <optional>
#include <string>

#include "fsd/filesystem.hpp"
#include "fsd/handle.hpp"
#include "fsd/opened_on.hpp"

namespace fsd {

class RecordHandle : public Handle {
 protected:
  /// `file`: the name in procs/ID/ ("signal", "steps"...).
  RecordHandle(Filesystem& fs, const Node& node, const char* file)
      : fs_(fs), id_(node.id()), path_("procs/" + id_ + "/" + file),
        opened_(node.record) {}

  /// ENOENT when another user's record has the name now (opened_on.hpp).
  std::optional<Reply> removed_since_open() const {
    if (!opened_.taken(fs_.sup(), id_)) return std::nullopt;
    return removed();
  }
  /// That ENOENT, for a caller that has the record's status already.
  static Reply removed() { return Reply::fail(OpenedOn::gone()); }

  Filesystem& fs_;
  const std::string id_;
  const std::string path_;
  const OpenedOn opened_;
};

}  // namespace fsd
