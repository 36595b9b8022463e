// steps.json at the root: every step of the box that is still kept
// (-o keep_steps_sec, a week by default), oldest first; the root
// status.json shows the last 30. Read from the state directory at open.
#include "fsd/files.hpp"

namespace fsd {

std::unique_ptr<Handle> open_box_steps(Filesystem& fs, const Node&, const OpenRequest&) {
  return std::make_unique<SnapshotHandle>(fs.box_steps().all());
}

}  // namespace fsd
