// OwnMount: paths resolved a name at a time without a look into the mount.
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "supervisor/own_mount.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using sup::OwnMount;
using sbxtest::TempDir;

TEST(OwnMountTest, APathIntoTheMountByNameLinkOrDotsIsHeld) {
  TempDir tmp{"sbx-own"};
  const std::string t = tmp.path();
  ASSERT_EQ(::mkdir((t + "/mnt").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((t + "/work").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((t + "/mnt").c_str(), (t + "/to-mnt").c_str()), 0);
  ASSERT_EQ(::symlink("../mnt/procs", (t + "/work/rel").c_str()), 0);
  ASSERT_EQ(::symlink("loop", (t + "/loop").c_str()), 0);
  const OwnMount own(t + "/mnt");
  const std::vector<std::string> held = {t + "/mnt",         t + "/mnt/procs/x",         t + "/to-mnt",
                                         t + "/to-mnt/procs", t + "/work/rel",            t + "/work/../mnt",
                                         t + "/work/./../to-mnt/a", t + "//mnt"};
  for (const std::string& p : held)
    EXPECT_TRUE(own.holds(p)) << p;
  const std::vector<std::string> not_held = {t + "/work", t + "/mntx", t + "/mnt-other/a", t + "/work/missing/../..",
                                             t + "/loop", "/"};
  for (const std::string& p : not_held)
    EXPECT_FALSE(own.holds(p)) << p;
  EXPECT_EQ(OwnMount::resolve_outside(t + "/work/./x/../y", {t + "/mnt"}), t + "/work/y");
  EXPECT_EQ(OwnMount::resolve_outside(t + "/to-mnt", {t + "/mnt"}), std::nullopt);
  EXPECT_FALSE(OwnMount().holds(t + "/mnt")) << "no mount: nothing held";
  // What to look at instead: the path resolved (a link changed since is
  // not followed again).
  EXPECT_EQ(own.outside(t + "/work/./x"), t + "/work/x");
  // /proc/PID/cwd and root lead where their text does not say: not followed.
  EXPECT_TRUE(own.holds("/proc/self/cwd"));
  EXPECT_TRUE(own.holds("/proc/" + std::to_string(::getpid()) + "/root/tmp"));
  EXPECT_FALSE(own.holds("/proc/self/status")) << "a file of /proc is no link";
}

}  // namespace
