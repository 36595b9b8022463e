#pragma once
// The records a listing of running commands looks at (list_running(): the
// root status.json, the `running` listings): every record from the moment it
// is put in the table until a listing finds it ended or an empty slot
// ("settled"), and a count of the settled records that ended, per owner.
// With 1 000 running and 10 000 ended, walking the whole table was two
// fifths of a status.json read: each record's node is cold in the cache
// (bench/RESULTS.md, "status.json: the running records only").
//
// Sound because a record that ended, or an empty slot, is shown so until a
// new record takes its place in the table: a re-run of a named slot, a start
// into a slot and a restored record are all put anew (Impl::put_record).
// Guarded by the supervisor's lock, like the table.
#include <sys/types.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "supervisor/record.hpp"

namespace sup {

class LiveRecords {
 public:
  using Table = std::map<std::string, Record>;

  /// `it` was just put in the table (a new record, or one in another's place).
  void entered(Table::iterator it);
  /// `it` is about to be erased, or replaced by put_record.
  void leaving(Table::iterator it);

  /// Calls `f(const Record&)` for each record that has neither ended nor is
  /// an empty slot, in id order (with `owner`, only that user's); settles
  /// those found ended or empty. Returns how many records have ended (with
  /// `owner`, of that user's).
  template <class F>
  std::size_t walk(std::optional<uid_t> owner, F&& f) {
    for (auto u = unsettled_.begin(); u != unsettled_.end();) {
      Record& r = u->second->second;
      const CommandState s = shown_state(r);
      if (s != CommandState::empty && !has_ended(s)) {
        if (!owner || r.owner_uid == *owner) f(static_cast<const Record&>(r));
        ++u;
        continue;
      }
      settle(r, s);
      u = unsettled_.erase(u);
    }
    if (!owner) return ended_;
    const auto it = ended_by_uid_.find(*owner);
    return it == ended_by_uid_.end() ? 0 : it->second;
  }

 private:
  void settle(Record& r, CommandState shown);

  // Keyed by a view of the table's own key: stable while its node lives.
  std::map<std::string_view, Table::iterator> unsettled_;
  std::unordered_map<uid_t, std::size_t> ended_by_uid_;
  std::size_t ended_ = 0;
};

}  // namespace sup
