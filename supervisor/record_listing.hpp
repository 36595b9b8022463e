#pragma once
// What a listing of procs/ or logs/ shows of the records (Supervisor::
// entries()): each record's id, serial, owner and emptiness, kept in serial
// order beside the table. Walking the table itself for a listing of 11 000
// records took about 3 ms, most of it the cache misses of one cold node
// after another (perf: std::_Rb_tree_increment); this is one array.
//
// A record leaves a hole that a later one of the same serial (a slot run
// again, a restored record: the same id keeps its serial) fills in place;
// the holes are swept out once they outnumber the entries, so a start or a
// removal costs a binary search, not a shift of the whole array.
// Guarded by the supervisor's lock, like the table (Impl::put_record and
// Impl::drop_record keep it).
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "supervisor/supervisor.hpp"

namespace sup {

class RecordListing {
 public:
  /// The record of `serial` is in the table now (in place of any other of that serial).
  void add(const std::string& id, std::uint64_t serial, uid_t owner, bool empty);
  /// The record of `serial` left the table.
  void remove(std::uint64_t serial);
  /// The records, in serial order.
  std::vector<RecordEntry> entries() const;
  std::size_t size() const { return live_; }

 private:
  struct Slot {
    RecordEntry entry;
    bool live = false;
  };
  std::vector<Slot>::iterator find(std::uint64_t serial);
  void sweep();

  std::vector<Slot> slots_;  // by serial, with holes
  std::size_t live_ = 0;
};

}  // namespace sup
