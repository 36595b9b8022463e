#pragma once
// An open directory of the tree: its listing, served from an offset (each
// entry's own place, tree.cpp), and how it uses the kernel's copy of the listing
// (listing_cache.hpp). A plain or filling handle lists at opendir; a handle
// that reads the kernel's copy lists only if the kernel asks it for an
// offset (pages of the copy it let go), at that moment.
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <fuse_lowlevel.h>

#include "fsd/files.hpp"
#include "fsd/listing_cache.hpp"

namespace fsd {

class DirHandle : public Handle {
 public:
  /// Opens `dir` for `who`: lists it now unless the kernel's copy may be
  /// used. Sets fi's cache flags; an error (ENOTDIR) is the listing's.
  static sup::Result<std::unique_ptr<DirHandle>> open(Filesystem& fs, const Node& dir, const Requester& who,
                                                      fuse_file_info* fi);
  DirHandle(Filesystem& fs, Node dir, Requester who) : fs_(fs), dir_(std::move(dir)), who_(std::move(who)) {}
  ~DirHandle() override;

  /// The entries from `off` that fit in `size` bytes, as readdir answers them.
  Reply list(fuse_req_t req, std::size_t size, off_t off);

 private:

  Filesystem& fs_;
  const Node dir_;
  const Requester who_;
  std::optional<ListingCache::Dir> cached_;  // the copy this handle uses, if any
  ListingCache::Mode mode_ = ListingCache::Mode::plain;
  std::mutex mu_;
  std::optional<std::vector<DirEntry>> entries_;  // guarded by mu_
  std::uint64_t generation_ = 0;                  // of entries_; guarded by mu_
};

}  // namespace fsd
