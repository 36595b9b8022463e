#pragma once
// Folders made ahead of the starts that will need them.
//
// A start prepares its record in a new folder of staging/, which carries the
// ext4 attribute T so that each record lands in a block group of its own
// (state_loader.cpp). The price is paid at mkdir: ext4's Orlov allocator
// weighs every flex group of the disk for a folder so placed, 201 us (median)
// on this project's machines, against 32 us to rename a folder within
// staging/ (bench/RESULTS.md). So a few such folders, `staging/spare-N`, are
// made on the work pool while starts are few; a start renames one to its own
// name. The replacements are made a while after the start that took one
// (`later`), not on its path and not beside it: on a machine of two cores a
// mkdir made at the same moment takes the CPU and staging/'s lock from the
// start it was meant to spare. Where none is left (a burst of
// starts) a start makes its folder itself, as before.
//
// A spare also holds what the caller's `prepare` puts in it: the files every
// start creates in its folder (supervisor.cpp), so that the start writes
// into them instead of allocating their inodes on its path, in a block
// group whose inode table may not be in memory (a read from disk, 1.5-2 ms
// on the guests of bench/RESULTS.md). A folder that must be empty (a named
// slot's) is made with make_empty().
//
// A spare is in staging/, so a supervisor that opens the state directory
// removes one left by a daemon that died, as it removes whatever else it
// finds there but a start (state_loader.cpp). The destructor removes the
// spares still kept: it must run after the work pool has been joined.
//
// Thread-safe.
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace sup {

class SpareFolders {
 public:
  /// Runs a task on a thread that may do file I/O, some time from now.
  using Later = std::function<void(std::function<void()>)>;
  /// Fills a new spare, given as an open folder; 0 or an errno (the spare
  /// is then removed and the round of refills ends).
  using Prepare = std::function<int(int dirfd)>;

  /// Keeps up to `keep` spares in `dir`, made by tasks given to `later` and
  /// filled by `prepare` (may be null: empty spares). Makes none until
  /// refill() or refill_later().
  SpareFolders(std::string dir, unsigned keep, Later later, Prepare prepare = nullptr);
  ~SpareFolders();
  SpareFolders(const SpareFolders&) = delete;
  SpareFolders& operator=(const SpareFolders&) = delete;

  /// Creates the folder `path` (mode 0700, in `dir`, which must not exist):
  /// a spare renamed when there is one (with what `prepare` put in it), else
  /// an empty one by mkdir. Returns 0 or the errno of mkdir.
  int make(const std::string& path);
  /// The same, always empty: mkdir, no spare.
  int make_empty(const std::string& path);

  /// Makes spares until `keep` exist. Runs on the calling thread.
  void refill();
  /// Hands refill() to `later`, unless it has been handed already or no
  /// spare is missing. Called once a start is decided.
  void refill_later();

  /// Spares made and not yet taken (for tests).
  std::size_t ready() const;

 private:
  const std::string dir_;
  const unsigned keep_;
  const Later later_;
  const Prepare prepare_;
  mutable std::mutex mu_;
  std::vector<std::string> ready_;  // guarded by mu_: paths of spares made
  std::uint64_t next_ = 0;          // guarded by mu_: the N of the next spare's name
  bool refill_posted_ = false;      // guarded by mu_
  bool making_ = false;             // guarded by mu_: a refill() is under way
};

}  // namespace sup
