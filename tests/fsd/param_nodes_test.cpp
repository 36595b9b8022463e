// The table of inodes of names with parameters: same key, same inode; an
// entry lives while the kernel holds lookups of it.
#include <gtest/gtest.h>

#include "fsd/param_nodes.hpp"

namespace {

fsd::FileParams params(std::string_view file, std::string_view keys) {
  auto r = fsd::parse_file_params(file, fsd::find_param_file(fsd::ParamDir::record, file), keys, {});
  EXPECT_TRUE(r) << r.error().message;
  return r.value();
}

TEST(ParamNodes, TheSameKeysGetTheSameInode) {
  fsd::ParamNodes nodes;
  const fuse_ino_t a = nodes.acquire(7, fsd::Kind::wait, params("wait", "timeoutSec=5,tailBytes=10"));
  const fuse_ino_t b = nodes.acquire(7, fsd::Kind::wait, params("wait", "tailBytes=10,timeoutSec=5"));
  EXPECT_EQ(a, b);
  EXPECT_TRUE(fsd::ParamNodes::is_param_ino(a));
  EXPECT_FALSE(fsd::decode_ino(a) && fsd::ParamNodes::is_param_ino(fsd::record_ino(7, fsd::Kind::wait)));
  EXPECT_NE(a, nodes.acquire(8, fsd::Kind::wait, params("wait", "timeoutSec=5,tailBytes=10")));
  EXPECT_NE(a, nodes.acquire(7, fsd::Kind::tail, params("tail", "tailBytes=10")));
  EXPECT_NE(a, nodes.acquire(7, fsd::Kind::wait, params("wait", "timeoutSec=6")));
  EXPECT_EQ(nodes.size(), 4u);
  auto e = nodes.find(a);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->kind, fsd::Kind::wait);
  EXPECT_EQ(e->serial, 7u);
  EXPECT_EQ(e->params->number("timeoutSec"), 5);
  // Its parameters are spelled as the latest lookup spelled them.
  EXPECT_EQ(e->params->given(), "tailBytes=10,timeoutSec=5");
  nodes.acquire(7, fsd::Kind::wait, params("wait", "timeoutSec=5,tailBytes=10"));
  EXPECT_EQ(nodes.find(a)->params->given(), "timeoutSec=5,tailBytes=10");
}

TEST(ParamNodes, AnEntryGoesWhenEveryLookupIsForgotten) {
  fsd::ParamNodes nodes;
  const fsd::FileParams p = params("tail", "tailBytes=1");
  const fuse_ino_t a = nodes.acquire(1, fsd::Kind::tail, p);
  nodes.acquire(1, fsd::Kind::tail, p);
  nodes.acquire(1, fsd::Kind::tail, p);
  nodes.forget(a, 2);
  EXPECT_TRUE(nodes.find(a));
  nodes.forget(a, 1);
  EXPECT_FALSE(nodes.find(a));
  EXPECT_EQ(nodes.size(), 0u);
  nodes.forget(a, 1);                                  // twice: ignored
  nodes.forget(fsd::record_ino(1, fsd::Kind::tail), 5);  // not ours: ignored
  // A new entry for the same key gets a new inode (never reused).
  EXPECT_NE(nodes.acquire(1, fsd::Kind::tail, p), a);
}

TEST(ParamNodes, InodesStayClearOfComputedOnesAndOfBit62) {
  EXPECT_FALSE(fsd::ParamNodes::is_param_ino(fsd::record_ino(123456, fsd::Kind::wait)));
  EXPECT_FALSE(fsd::ParamNodes::is_param_ino(fuse_ino_t{1} << 62));
  EXPECT_FALSE(fsd::ParamNodes::is_param_ino(fsd::ParamNodes::kBit | (fuse_ino_t{1} << 62)));
  EXPECT_FALSE(fsd::ParamNodes::is_param_ino(fsd::fixed_ino(fsd::Kind::status)));
}

}  // namespace
