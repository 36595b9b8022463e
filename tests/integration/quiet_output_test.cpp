// A command's output wakes the daemon only while someone follows it
// (supervisor.hpp, subscribe): a command that prints hundreds of times
// costs the daemon's threads a handful of wake-ups, a follower's hundreds.
#include <dirent.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using QuietOutputTest = SbxfsTest;

/// Voluntary context switches of all of `pid`'s threads so far: each is a
/// wake-up after a wait (the involuntary ones count the machine's load).
std::uint64_t switches(pid_t pid) {
  std::uint64_t n = 0;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const std::string& tid : list_dir(tasks)) {
    std::ifstream in(tasks + "/" + tid + "/status");
    for (std::string line; std::getline(in, line);)
      if (line.starts_with("voluntary_ctxt_switches:"))
        n += std::stoull(line.substr(line.find(':') + 1));
  }
  return n;
}

TEST_F(QuietOutputTest, APrintingCommandWakesTheDaemonOnlyWhileFollowed) {
  // 300 lines, each its own write, 3 ms apart.
  const std::string talker =
      "/usr/bin/python3 -c 'import time; [(print(i, flush=True), time.sleep(0.003)) for i in range(300)]'";
  const pid_t daemon = daemon_pid();

  const std::uint64_t s0 = switches(daemon);
  const std::string quiet = start(talker);
  ASSERT_FALSE(quiet.empty());
  // One blocking read of `wait` (wait_ended() would poll status.json).
  const RunResult ended = run("cat \"$MNT/procs/" + quiet + "/wait\"", 30);
  EXPECT_EQ(ended.code, 0) << ended.err;
  const std::uint64_t unfollowed = switches(daemon) - s0;

  const std::uint64_t s1 = switches(daemon);
  const std::string followed = start(talker);
  ASSERT_FALSE(followed.empty());
  const pid_t follower = spawn_bg("cat \"$MNT/procs/" + followed + "/log,follow\" > " + dir_ + "/follow.out");
  EXPECT_EQ(run("cat \"$MNT/procs/" + followed + "/wait\"", 30).code, 0);
  EXPECT_EQ(wait_bg(follower, 5s), 0);
  const std::uint64_t with_follower = switches(daemon) - s1;

  EXPECT_EQ(log(quiet).size(), read_file(dir_ + "/follow.out").data.size()) << "the follower saw it all";
  EXPECT_GT(with_follower, 100u) << "a follower is told of the writes";
  EXPECT_EQ(wait_ended(quiet)["exitCode"], 0);
  EXPECT_LT(unfollowed, 100u) << "wake-ups of the daemon for a command nobody followed (followed: "
                              << with_follower << ")";
}

}  // namespace
}  // namespace sbxit
