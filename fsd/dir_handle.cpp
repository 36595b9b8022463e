#include "fsd/dir_handle.hpp"

#include <algorithm>
#include <string>

namespace fsd {

namespace {

std::optional<ListingCache::Dir> copy_of(Kind kind) {
  if (kind == Kind::procs) return ListingCache::Dir::procs;
  if (kind == Kind::logs) return ListingCache::Dir::logs;
  return std::nullopt;
}

}  // namespace

sup::Result<std::unique_ptr<DirHandle>> DirHandle::open(Filesystem& fs, const Node& dir, const Requester& who,
                                                        fuse_file_info* fi) {
  auto h = std::make_unique<DirHandle>(fs, dir, who);
  ListingCache* copies = fs.listings();
  h->cached_ = copies ? copy_of(dir.kind) : std::nullopt;
  if (h->cached_) h->mode_ = copies->open(*h->cached_, fs.sup().listing_generation());
  if (h->mode_ != ListingCache::Mode::keep) {
    sup::Result<std::vector<DirEntry>> entries = list_dir(fs, dir, who, &h->generation_);
    if (!entries) return entries.error();  // the destructor closes what open() counted
    h->entries_ = std::move(entries.value());
  }
  fi->cache_readdir = h->mode_ != ListingCache::Mode::plain;
  // Only a fill drops the copy: a plain open beside a reader or a filler
  // of the copy leaves it to them.
  fi->keep_cache = h->cached_ && h->mode_ != ListingCache::Mode::fill;
  return h;
}

DirHandle::~DirHandle() {
  if (cached_) fs_.listings()->closed(*cached_, mode_);
}

Reply DirHandle::list(fuse_req_t req, std::size_t size, off_t off) {
  std::lock_guard g(mu_);
  if (!entries_) {
    sup::Result<std::vector<DirEntry>> entries = list_dir(fs_, dir_, who_, &generation_);
    if (!entries) return Reply::fail(entries.error());
    entries_ = std::move(entries.value());
    fs_.listings()->made(*cached_, generation_);
  }
  const std::vector<DirEntry>& all = *entries_;
  // After the entry the caller read last, found by its place (DirEntry::off),
  // also in a listing made since.
  const auto next = std::upper_bound(all.begin(), all.end(), off, [](off_t o, const DirEntry& e) { return o < e.off; });
  const std::size_t from = static_cast<std::size_t>(next - all.begin());
  // The end of the listing: the kernel now holds a filler's copy whole.
  if (from >= all.size() && mode_ == ListingCache::Mode::fill) fs_.listings()->filled(*cached_, generation_);
  std::string buf(size, '\0');
  std::size_t used = 0;
  for (std::size_t i = from; i < all.size(); ++i) {
    const DirEntry& e = all[i];
    struct stat st {};
    st.st_ino = e.ino;
    st.st_mode = e.mode;
    const std::size_t need =
        fuse_add_direntry(req, buf.data() + used, size - used, e.name.c_str(), &st, e.off);
    if (need > size - used) break;
    used += need;
  }
  buf.resize(used);
  return Reply::data(std::move(buf));
}

}  // namespace fsd
