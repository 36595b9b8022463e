// ListingCache: when a directory handle may read, fill or must leave alone
// the kernel's copy of a listing.
#include "fsd/listing_cache.hpp"

#include <gtest/gtest.h>

namespace fsd {
namespace {

using Dir = ListingCache::Dir;
using Mode = ListingCache::Mode;

/// A listing of `generation` read to its end by a fill handle, then closed.
void fill(ListingCache& c, Dir dir, std::uint64_t generation) {
  ASSERT_EQ(c.open(dir, generation), Mode::fill);
  c.filled(dir, generation);
  c.closed(dir, Mode::fill);
}

TEST(ListingCacheTest, TheFirstOpenFillsAndTheNextOnesReadTheCopy) {
  ListingCache c;
  fill(c, Dir::procs, 7);
  EXPECT_EQ(c.open(Dir::procs, 7), Mode::keep);
  EXPECT_EQ(c.open(Dir::procs, 7), Mode::keep);
}

TEST(ListingCacheTest, AChangedGenerationIsFilledAgainOnceTheReadersAreGone) {
  ListingCache c;
  fill(c, Dir::procs, 1);
  ASSERT_EQ(c.open(Dir::procs, 1), Mode::keep);
  // A record was made: the copy is stale; a reader of it is still open.
  EXPECT_EQ(c.open(Dir::procs, 2), Mode::plain);
  c.closed(Dir::procs, Mode::keep);
  EXPECT_EQ(c.open(Dir::procs, 2), Mode::fill);
}

TEST(ListingCacheTest, OnlyOneFillerAtATime) {
  ListingCache c;
  ASSERT_EQ(c.open(Dir::procs, 1), Mode::fill);
  EXPECT_EQ(c.open(Dir::procs, 1), Mode::plain) << "two fillers could interleave their entries";
  c.closed(Dir::procs, Mode::plain);
  c.closed(Dir::procs, Mode::fill);
  EXPECT_EQ(c.open(Dir::procs, 1), Mode::fill) << "the first never reached the end";
}

TEST(ListingCacheTest, AFillOfAnOlderGenerationIsNotKept) {
  ListingCache c;
  fill(c, Dir::procs, 1);  // its listing was made before the change to 2
  EXPECT_EQ(c.open(Dir::procs, 2), Mode::fill);
}

TEST(ListingCacheTest, AReaderThatListsAnotherGenerationSpoilsTheCopy) {
  ListingCache c;
  fill(c, Dir::procs, 1);
  ASSERT_EQ(c.open(Dir::procs, 1), Mode::keep);
  c.made(Dir::procs, 1);  // the kernel let pages go; the same generation refills them
  ASSERT_EQ(c.open(Dir::procs, 1), Mode::keep);
  c.made(Dir::procs, 2);  // a record was made since: the copy may now mix two
  c.closed(Dir::procs, Mode::keep);
  c.closed(Dir::procs, Mode::keep);
  EXPECT_EQ(c.open(Dir::procs, 1), Mode::fill) << "not trusted again, even for its old generation";
}

TEST(ListingCacheTest, ProcsAndLogsAreApart) {
  ListingCache c;
  ASSERT_EQ(c.open(Dir::procs, 1), Mode::fill);
  fill(c, Dir::logs, 1);
  EXPECT_EQ(c.open(Dir::logs, 1), Mode::keep);
  EXPECT_EQ(c.open(Dir::procs, 1), Mode::plain);
}

}  // namespace
}  // namespace fsd
