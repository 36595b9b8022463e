// procs/ID/tail: the last 4096 bytes of the log (`tail,tailBytes=N`: the
// last N, 1..16384), secrets masked, fixed at open.
#include "fsd/files.hpp"

namespace fsd {

std::unique_ptr<Handle> open_tail(Filesystem& fs, const Node& node, const OpenRequest&) {
  const auto bytes = node.keys().number("tailBytes").value_or(Filesystem::kDefaultTailBytes);
  return std::make_unique<SnapshotHandle>(fs.log_tail(*node.record, static_cast<std::size_t>(bytes)));
}

}  // namespace fsd
