// -o log_max: the log keeps the first half of log_max, a marker line and
// the latest output; status.json, wait and the log views say so.
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class LogLimitTest : public SbxfsTest {
 protected:
  LogLimitTest() { daemon_options_ = {"-o", "log_max=4096"}; }
};

TEST_F(LogLimitTest, SmallCapKeepsTheStartAndTheEndAndCountsTheRest) {
  const std::string marker =
      "\n[sbxfs: log_max (4096 bytes) reached: output dropped here is counted in droppedBytes; the latest output "
      "follows]\n";
  std::string id = start("head -c 100000 /dev/zero | tr '\\0' x; echo; echo last");
  ASSERT_FALSE(id.empty());
  json w = wait_json(id);
  ASSERT_TRUE(w.is_object());
  EXPECT_EQ(w["proc"]["exitCode"], 0) << "the command ran to its end past the cap";
  EXPECT_EQ(w["proc"]["truncated"], true);
  const std::string log = this->log(id);
  const std::string head = std::string(2048, 'x') + marker;
  ASSERT_TRUE(log.starts_with(head)) << log.substr(0, 2200);
  const std::string kept = log.substr(head.size());
  EXPECT_TRUE(kept.ends_with("xx\nlast\n")) << "what the command printed last";
  EXPECT_GE(kept.size(), 1024u);
  EXPECT_LE(kept.size(), 2048u);
  EXPECT_EQ(kept.find_first_not_of('x'), kept.size() - 6);
  EXPECT_EQ(w["proc"]["droppedBytes"], 100006 - 2048 - kept.size());
  EXPECT_EQ(file("procs/" + id + "/stdout"), log);
  EXPECT_TRUE(w["proc"]["logTail"].get<std::string>().ends_with("x\nlast\n"));
  json st = status_json(id);
  EXPECT_EQ(st["truncated"], true);
  EXPECT_EQ(st["droppedBytes"], 100006 - 2048 - kept.size());

  std::string small = start("echo fits");
  ASSERT_FALSE(small.empty());
  json s = wait_json(small);
  EXPECT_EQ(s["proc"]["truncated"], false);
  EXPECT_EQ(s["proc"]["droppedBytes"], 0);
  EXPECT_EQ(this->log(small), "fits\n");
}

}  // namespace
}  // namespace sbxit
