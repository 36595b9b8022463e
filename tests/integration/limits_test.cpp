// The daemon's limits on records: -o max_running (EAGAIN past it, with a
// reason in errors, nothing created) and -o keep_ended (the oldest ended
// commands and their logs go first).
#include <algorithm>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class MountLimitsTest : public SbxfsTest {
 protected:
  MountLimitsTest() { daemon_options_ = {"-o", "keep_ended=2,max_running=1"}; }
};

TEST_F(MountLimitsTest, MaxRunningIsEagainWithAReasonAndNothingMade) {
  const std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const auto before = procs();
  const std::size_t errs_before = errors().size();
  auto r = bash("echo 'sleep 30' > \"$MNT/cmd\"");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("write error: Resource temporarily unavailable"), std::string::npos) << r.err;
  EXPECT_EQ(procs(), before) << "nothing is created";
  auto errs = errors();
  ASSERT_EQ(errs.size(), errs_before + 1);
  EXPECT_EQ(errs.back()["errno"], "EAGAIN");
  EXPECT_NE(errs.back()["error"].get<std::string>().find("max_running=1"), std::string::npos) << errs.back().dump();
  // Once it has ended there is room again.
  ASSERT_EQ(run("echo > \"$MNT/procs/" + id + "/stop\"").code, 0);
  const std::string next = start("true");
  EXPECT_FALSE(next.empty());
}

TEST_F(MountLimitsTest, KeepEndedKeepsTheNewestAndTheirLogs) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(start("echo run " + std::to_string(i)));
    ASSERT_FALSE(ids.back().empty());
    wait_json(ids.back());
  }
  const std::vector<std::string> kept = {ids[1], ids[2]};
  EXPECT_TRUE(wait_until([&] { return procs() == kept; }, 5s)) << "procs: " << ::testing::PrintToString(procs());
  EXPECT_EQ(stat_errno(p("procs/" + ids[0])), ENOENT);
  EXPECT_EQ(stat_errno(p("logs/" + ids[0] + ".log")), ENOENT);
  EXPECT_EQ(file("logs/" + ids[2] + ".log"), "run 2\n");
  EXPECT_EQ(root_status()["finished"], 2);
}

}  // namespace
}  // namespace sbxit
