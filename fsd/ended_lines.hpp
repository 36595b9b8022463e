#pragma once
// The root list's entries of ended records, rendered once: status.json,all
// lists thousands of them, and a record that has ended never changes (until
// its named slot runs again, which changes its startedAt, or it is removed).
// Each entry is kept in two pieces around the value of `mine`, which
// depends on the reader, and without its closing brace, so `logTail` can
// follow. Thread-safe; entries of records that are gone are dropped at the
// next listing.
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "supervisor/command_status.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

class EndedLines {
 public:
  /// Writes a record's entry: the fields before `mine` (the object opened),
  /// then after it (not closed).
  using Render = std::function<void(const sup::CommandStatus& st, std::string& head, std::string& rest)>;
  /// Whether the reader's `mine` holds for a record (only owner_uid,
  /// owner_sid and client are set in what it gets).
  using Mine = std::function<bool(const sup::CommandStatus& owner)>;
  /// Appends more of an entry (logTail) before it is closed; may be null.
  using Extra = std::function<void(const sup::CommandStatus& owner, std::string& out)>;

  /// Appends the entry of ended record `e` to `out`. A record seen for the
  /// first time (or in a new run) is fetched from `sup` and rendered. False
  /// (nothing appended) when it is gone or runs again by now.
  bool append(std::string& out, sup::Supervisor& sup, const sup::EndedEntry& e, const Render& render,
              const Mine& mine, const Extra& extra);
  /// Drops the entries of records not in `ended` (every ended record there is).
  void keep_only(const std::vector<sup::EndedEntry>& ended);
  std::size_t size() const;

 private:
  struct Line {
    std::string started_at, finished_at;  // which run
    sup::CommandStatus owner;             // owner_uid, owner_sid, client, bg_id and log_file only
    std::string head, rest;
  };
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, Line> lines_;  // by serial; guarded by mu_
};

}  // namespace fsd
