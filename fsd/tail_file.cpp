// procs/ID/tail: the last 4096 bytes of the log, secrets masked, fixed at open.
#include "fsd/files.hpp"

namespace fsd {

std::unique_ptr<Handle> open_tail(Filesystem& fs, const Node& node) {
  return std::make_unique<SnapshotHandle>(fs.log_tail(*node.record));
}

}  // namespace fsd
