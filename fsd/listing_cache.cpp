#include "fsd/listing_cache.hpp"

namespace fsd {

ListingCache::Mode ListingCache::open(Dir dir, std::uint64_t generation) {
  std::lock_guard g(mu_);
  State& s = of(dir);
  if (s.complete == generation) {
    ++s.keeping;
    return Mode::keep;
  }
  // A stale copy is refilled only once nobody reads or fills it: a fill
  // beside them could interleave its entries with theirs.
  if (s.filling || s.keeping > 0) return Mode::plain;
  s.filling = true;
  s.complete.reset();
  return Mode::fill;
}

void ListingCache::filled(Dir dir, std::uint64_t generation) {
  std::lock_guard g(mu_);
  of(dir).complete = generation;
}

void ListingCache::made(Dir dir, std::uint64_t generation) {
  std::lock_guard g(mu_);
  State& s = of(dir);
  if (s.complete != generation) s.complete.reset();
}

void ListingCache::closed(Dir dir, Mode mode) {
  std::lock_guard g(mu_);
  State& s = of(dir);
  if (mode == Mode::fill) s.filling = false;
  if (mode == Mode::keep && s.keeping > 0) --s.keeping;
}

}  // namespace fsd
