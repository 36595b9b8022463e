// -o log_max: the log keeps its first bytes and a marker line; status.json,
// wait and the log views say so.
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class LogLimitTest : public SbxfsTest {
 protected:
  LogLimitTest() { daemon_options_ = {"-o", "log_max=4096"}; }
};

TEST_F(LogLimitTest, SmallCapKeepsTheStartAndCountsTheRest) {
  const std::string marker =
      "[sbxfs: log_max (4096 bytes) reached: later output is counted in droppedBytes, not kept]\n";
  std::string id = start("head -c 100000 /dev/zero | tr '\\0' x; echo; echo last");
  ASSERT_FALSE(id.empty());
  json w = wait_json(id);
  ASSERT_TRUE(w.is_object());
  EXPECT_EQ(w["proc"]["exitCode"], 0) << "the command ran to its end past the cap";
  EXPECT_EQ(w["proc"]["truncated"], true);
  EXPECT_EQ(w["proc"]["droppedBytes"], 100006 - 4096);
  EXPECT_EQ(log(id), std::string(4096, 'x') + "\n" + marker);
  EXPECT_EQ(file("procs/" + id + "/stdout"), std::string(4096, 'x') + "\n" + marker);
  json st = status_json(id);
  EXPECT_EQ(st["truncated"], true);
  EXPECT_EQ(st["droppedBytes"], 100006 - 4096);

  std::string small = start("echo fits");
  ASSERT_FALSE(small.empty());
  json s = wait_json(small);
  EXPECT_EQ(s["proc"]["truncated"], false);
  EXPECT_EQ(s["proc"]["droppedBytes"], 0);
  EXPECT_EQ(log(small), "fits\n");
}

}  // namespace
}  // namespace sbxit
