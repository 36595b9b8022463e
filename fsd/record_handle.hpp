#pragma once
// The handle of a file of procs/ID/ that acts on its command: the
// filesystem, the command's id, and the file's path as `errors` names it.
#include <string>

#include "fsd/filesystem.hpp"
#include "fsd/handle.hpp"

namespace fsd {

class RecordHandle : public Handle {
 protected:
  /// `file`: the name in procs/ID/ ("signal", "steps"...).
  RecordHandle(Filesystem& fs, std::string id, const char* file)
      : fs_(fs), id_(std::move(id)), path_("procs/" + id_ + "/" + file) {}

  Filesystem& fs_;
  const std::string id_;
  const std::string path_;
};

}  // namespace fsd
