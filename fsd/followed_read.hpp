#pragma once
// The reading side shared by the views of a log that may grow (stdout and
// stderr from the index, `,timestamps`, `,follow`, `events`): a read gets
// what is there now; with `follow`, a read at the end is stored
// (FollowRequests) until there is more, and gets EOF once the run this
// file shows has ended and everything was read. poll() is readable when a
// read would not wait.
#include <atomic>
#include <cstddef>
#include <optional>
#include <string>

#include "fsd/filesystem.hpp"
#include "fsd/handle.hpp"
#include "fsd/opened_on.hpp"
#include "supervisor/log_index.hpp"

namespace fsd {

class FollowedReadHandle : public Handle {
 public:
  FollowedReadHandle(Filesystem& fs, const sup::CommandStatus& st, bool follow)
      : fs_(fs), id_(st.bg_id), log_owner_(st.log_owner), opened_(st.owner_uid), dir_(dir_of(st)), follow_(follow) {}
  ~FollowedReadHandle() override;

  Reply read(fuse_req_t req, std::size_t size, off_t off) override;
  Reply poll(fuse_req_t req, fuse_pollhandle* ph, unsigned events) override;
  bool would_block() override { return follow_ && !readable(); }

  /// The record's folder in the state directory.
  static std::string dir_of(const sup::CommandStatus& st);

 protected:
  /// The view's bytes at [off, off+size) that are there now: fewer, or none
  /// at the end. `ended`: the run has ended (so nothing more will come).
  /// A data reply, or an error.
  virtual Reply fetch(std::size_t size, off_t off, bool ended) = 0;
  /// Whether a fetch at `off` would find bytes now.
  virtual bool more_at(off_t off, bool ended) = 0;
  /// The run this file shows has ended: the record is gone, no longer runs,
  /// or runs again (another start).
  bool ended() const;
  /// The record this file was opened on was removed and the name is
  /// another user's record now: its output is never read through this
  /// file (a file opened before the log was made binds to it on its first read).
  bool name_taken_by_another() const { return opened_.taken(fs_.sup(), id_); }
  /// LogIndex::open of the record's folder, unless the name is another
  /// user's record now (before the open, or just after it): then `index`
  /// stays closed and `*taken` is set (nothing to read, as a removed
  /// record that had no output).
  int open_index(sup::LogIndex& index, bool* taken) const;
  /// The record under the name now, if it is of the user this file was
  /// opened on (another user's is as good as gone to this file).
  std::optional<sup::CommandStatus> status_if_ours() const {
    std::optional<sup::CommandStatus> st = fs_.sup().status(id_, sup::CpuFigure::skip);
    if (st && !opened_.ours(*st)) st.reset();
    return st;
  }

  Filesystem& fs_;
  const std::string id_;
  const std::uint64_t log_owner_;  ///< of the run this file shows (restarts write on into its log); 0: not started yet
  const OpenedOn opened_;          ///< whose record it was opened on
  const std::string dir_;
  const bool follow_;

 private:
  /// The answer now; nullopt: wait (follow only).
  std::optional<Reply> attempt(std::size_t size, off_t off);
  bool readable();

  std::atomic<off_t> next_{0};  // where the last answered read ended (for poll)
};

}  // namespace fsd
