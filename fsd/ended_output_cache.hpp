#pragma once
// Lets the kernel cache an ended command's output. Once a command has
// exited, its log, stdout and stderr (and logs/ID.log) never change until
// its named slot runs again or its record is removed; so their plain names
// (no parameters) open through the page cache, kept across opens, with
// attributes kept an hour. A second `cat` is then served from the kernel's
// memory at the speed of a local file, and mmap works. While a command
// runs, every read and stat reaches the daemon (direct_io, attributes
// never kept), as for every other file of the tree.
//
// When a command that the kernel may cache runs again or is removed, its
// inodes' pages and attributes are dropped (CacheInvalidator, at once; the
// start of a slot's next run is answered after the drop: cmd_file.cpp). A
// reply that the kernel asked for before that drop cannot bring the old
// attributes back: the kernel ignores attributes of a request sent before
// an inode's invalidation.
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fsd/cache_invalidator.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

struct Node;

class EndedOutputCache {
 public:
  /// How long the kernel keeps the attributes of output it may cache.
  static constexpr double kAttrTimeout = 3600;

  EndedOutputCache(const sup::Supervisor& sup, CacheInvalidator& invalidator) : sup_(sup), inval_(invalidator) {}

  /// Whether the kernel may keep `node`'s pages and attributes: the plain
  /// name of log, stdout, stderr or logs/ID.log of a command that has
  /// exited, and has not run again since `node` was resolved. A yes is
  /// remembered until changed() of its command.
  bool allow(const Node& node);
  /// Command `id` runs again or is gone (a `started` or `removed` event):
  /// the kernel drops what it keeps of its output. Any thread; never blocks.
  void changed(const std::string& id);

 private:
  const sup::Supervisor& sup_;
  CacheInvalidator& inval_;
  std::mutex mu_;
  std::unordered_map<std::string, std::uint64_t> serial_of_;  // guarded by mu_; ids allowed, their serials
};

}  // namespace fsd
