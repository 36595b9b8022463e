#pragma once
// Lets the kernel keep the listings of procs/ and logs/, so that `ls procs`
// of thousands of records reads the kernel's copy instead of asking the
// daemon for it a page at a time (FOPEN_CACHE_DIR, kept with keep_cache).
//
// What the kernel does with such a directory (fs/fuse/readdir.c): a handle
// opened with "cache" adds every entry the daemon sends it to the
// directory's copy, as long as the entries come in order from offset 0;
// the copy is complete once the daemon answered the end of the listing.
// Later handles opened with "cache" and "keep" read the copy; where a page
// of it is missing they ask the daemon for that offset, and a hole at the
// front makes the kernel start the copy afresh. An open without "keep"
// drops the copy's pages.
//
// The daemon cannot see the copy, so it only lets the kernel use it when
// it knows what the copy holds: the listing of one generation of the
// records (Supervisor::listing_generation(), which changes whenever a
// record is made, replaced or removed), filled by a single handle.
// - keep: the copy is complete and of the current generation. Such
//   handles may have to answer an offset themselves (pages the kernel let
//   go), from a listing they make then; if that listing is of another
//   generation, the copy may now mix two, and is not trusted again.
// - fill: nobody else uses the copy; this open drops it and fills it anew.
//   At the end of its listing the copy is of its listing's generation.
// - plain: the copy is being filled or read by others, or is stale while
//   they are open: this handle neither reads nor adds to it (as before).
// Consistency: a listing opened after a start's or a removal's answer is of
// a later generation, so it never gets "keep" for a copy made before it.
//
// Only where every reader sees the same listing (no allow_other): the copy
// is one for all users.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>

namespace fsd {

class ListingCache {
 public:
  enum class Dir { procs, logs };
  enum class Mode { plain, fill, keep };

  /// At opendir of `dir`, with the records' listing generation now: how the
  /// handle may use the kernel's copy. Each open is matched by one closed().
  Mode open(Dir dir, std::uint64_t generation);
  /// A fill handle answered the end of its listing, made at `generation`.
  void filled(Dir dir, std::uint64_t generation);
  /// A keep handle made its own listing, at `generation`, to answer an
  /// offset that the kernel's copy lacked.
  void made(Dir dir, std::uint64_t generation);
  /// A handle opened with `mode` is released.
  void closed(Dir dir, Mode mode);

 private:
  struct State {
    std::optional<std::uint64_t> complete;  // the copy's generation, when complete and trusted
    bool filling = false;                   // a fill handle is open
    std::size_t keeping = 0;                // keep handles open
  };
  State& of(Dir dir) { return dirs_[dir == Dir::procs ? 0 : 1]; }

  std::mutex mu_;
  State dirs_[2];  // guarded by mu_
};

}  // namespace fsd
