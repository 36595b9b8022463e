#pragma once
// The inodes of names with parameters (`wait,timeoutSec=5`). Unlike the
// tree's own files, their number is open-ended, so they are a table: an
// entry per (record serial, kind of file, canonical parameters), whose inode
// has bit 61 set (no computed inode has it) and is never reused within the
// daemon's life. The same name, and any name with the same keys in another
// order, gets the same inode while its entry lives; its parameters are
// those of the latest lookup (the same values, spelled as that name was, so
// that a message about the file opened after it names it as written).
//
// An entry lives while the kernel holds it: each LOOKUP answered with it adds
// one, FORGET takes away what the kernel says, and at 0 the entry is
// dropped. Thread-safe.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "fsd/file_params.hpp"
#include "fsd/inode.hpp"

namespace fsd {

class ParamNodes {
 public:
  static constexpr fuse_ino_t kBit = fuse_ino_t{1} << 61;
  static constexpr bool is_param_ino(fuse_ino_t ino) { return (ino & kBit) != 0 && (ino >> 62) == 0; }

  struct Entry {
    Kind kind;
    std::uint64_t serial = 0;  ///< the record's; 0 for a file of the root
    std::shared_ptr<const FileParams> params;
  };

  /// The inode of (serial, kind, params), with its lookup count raised by
  /// one: call once per LOOKUP answered with it.
  fuse_ino_t acquire(std::uint64_t serial, Kind kind, const FileParams& params);
  /// The kernel forgets `n` lookups of `ino` (FORGET, or a LOOKUP whose reply
  /// did not reach it). Inodes not in the table are ignored.
  void forget(fuse_ino_t ino, std::uint64_t n);
  /// The entry of `ino`; nullopt when there is none (forgotten, or never ours).
  std::optional<Entry> find(fuse_ino_t ino) const;
  /// Entries alive (status.json shows it: the kernel's caches must not make it grow).
  std::size_t size() const;

 private:
  using Key = std::tuple<std::uint64_t, Kind, std::string>;
  struct Slot {
    Entry entry;
    std::uint64_t lookups = 0;
    std::map<Key, fuse_ino_t>::iterator by_key;
  };

  mutable std::mutex mu_;
  std::map<Key, fuse_ino_t> by_key_;              // guarded by mu_
  std::unordered_map<fuse_ino_t, Slot> by_ino_;   // guarded by mu_
  std::uint64_t next_ = 1;                        // guarded by mu_
};

}  // namespace fsd
