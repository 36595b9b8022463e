// What a listing shows of the records (RecordListing, no processes): serial
// order whatever the order of arrival, a serial's place kept across a
// re-run, and holes swept without losing or reordering an entry.
#include "supervisor/record_listing.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using sup::RecordListing;

std::vector<std::string> ids(const RecordListing& l) {
  std::vector<std::string> out;
  for (const sup::RecordEntry& e : l.entries()) out.push_back(e.bg_id);
  return out;
}

TEST(RecordListingTest, ListsBySerialWhateverTheOrderRecordsCameIn) {
  RecordListing l;
  l.add("b", 2, 0, false);
  l.add("d", 4, 0, false);
  l.add("a", 1, 0, false);  // a reload, say, in another order
  l.add("c", 3, 1000, true);
  EXPECT_EQ(ids(l), (std::vector<std::string>{"a", "b", "c", "d"}));
  const std::vector<sup::RecordEntry> all = l.entries();
  EXPECT_EQ(all[2].owner_uid, 1000u);
  EXPECT_TRUE(all[2].empty);
  EXPECT_FALSE(all[1].empty);
  EXPECT_EQ(l.size(), 4u);
}

TEST(RecordListingTest, ARecordRunAgainKeepsItsPlaceAndShowsItsNewOwnerAndEmptiness) {
  RecordListing l;
  l.add("slot", 1, 0, true);
  l.add("x", 2, 0, false);
  l.remove(1);  // put_record: the old record leaves, the new one enters
  EXPECT_EQ(ids(l), std::vector<std::string>{"x"});
  l.add("slot", 1, 7, false);
  ASSERT_EQ(ids(l), (std::vector<std::string>{"slot", "x"}));
  EXPECT_EQ(l.entries()[0].owner_uid, 7u);
  EXPECT_FALSE(l.entries()[0].empty);
  l.add("slot", 1, 8, false);  // in place of itself: still one entry
  EXPECT_EQ(l.size(), 2u);
  EXPECT_EQ(l.entries()[0].owner_uid, 8u);
}

TEST(RecordListingTest, RemovingWhatIsNotThereChangesNothing) {
  RecordListing l;
  l.add("a", 5, 0, false);
  l.remove(4);
  l.remove(6);
  l.remove(5);
  l.remove(5);
  EXPECT_EQ(l.size(), 0u);
  EXPECT_TRUE(l.entries().empty());
}

// Retention removes the oldest as new ones come: the holes at the front are
// swept now and then, and the listing stays exact through every sweep.
TEST(RecordListingTest, StaysExactThroughManyHolesAndSweeps) {
  RecordListing l;
  std::uint64_t next = 1;
  std::uint64_t oldest = 1;
  for (int i = 0; i < 1000; ++i) l.add("r" + std::to_string(next), next, 0, false), ++next;
  for (int i = 0; i < 5000; ++i) {
    l.add("r" + std::to_string(next), next, 0, false);
    ++next;
    l.remove(oldest++);
    if (i % 7 == 0) l.remove(next - 3);  // and one in the middle now and then
  }
  const std::vector<sup::RecordEntry> all = l.entries();
  ASSERT_EQ(all.size(), l.size());
  for (std::size_t i = 1; i < all.size(); ++i) ASSERT_LT(all[i - 1].serial, all[i].serial);
  for (const sup::RecordEntry& e : all) ASSERT_EQ(e.bg_id, "r" + std::to_string(e.serial));
  EXPECT_EQ(all.back().serial, next - 1);
  EXPECT_GE(all.front().serial, oldest);
}

}  // namespace
