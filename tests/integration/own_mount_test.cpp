// The daemon never looks into its own mount (supervisor/own_mount.hpp): a
// request's working directory or PATH there is left to the monitor, a
// process of its own, so that no thread of the daemon waits for the daemon
// (a kill -9 then would leave it a zombie and the mount hung).
#include <signal.h>

#include <fstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class OwnMountTest : public SbxfsTest {};

TEST_F(OwnMountTest, StartsWithPathsInTheMountRunWithoutTheDaemonLookingThere) {
  ASSERT_EQ(start(R"({"cmd": "sleep 30", "name": "s"})"), "s");
  const std::string trace_out = dir_ + "/daemon.strace";
  std::string why;
  const pid_t tracer = trace_daemon("-e trace=%file -o " + trace_out, why);
  if (tracer < 0) GTEST_SKIP() << "strace cannot trace the daemon here: " << why;

  // The writer's own folder, in the mount: the command runs there.
  RunResult r = run("cd \"$MNT/procs/s\" && exec 3<>../../cmd && echo pwd >&3 && read -r id <&3 && echo \"$id\"");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  wait_ended(id);
  EXPECT_EQ(log(id), mnt_ + "/procs/s\n");
  // A program looked for in a PATH folder in the mount, and a folder there
  // that does not exist: refused, by the monitor's exec and chdir.
  r = python(R"(
import errno, json, os
m = os.environ['MNT']
for req in ({"argv": ["no-such-program-x"], "env": {"PATH": m + "/procs/s:/nonexistent"}},
            {"cmd": "true", "cwd": m + "/procs/nowhere"}):
    fd = os.open(m + '/cmd', os.O_RDWR)
    try:
        os.write(fd, json.dumps(req).encode())
        print('started')
    except OSError as e:
        print(errno.errorcode[e.errno])
    os.close(fd)
)");
  EXPECT_EQ(r.out, "ENOENT\nENOENT\n") << r.err;
  const json disk = root_status()["disk"];
  EXPECT_TRUE(disk.is_array()) << disk;

  ::kill(tracer, SIGINT);
  wait_bg(tracer, 5s);
  std::ifstream in(trace_out);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    // readlink of /proc/PID/cwd gives the mount's path as its answer: a
    // look into procfs, not into the mount.
    if (line.find("readlink(\"/proc/") != std::string::npos) continue;
    EXPECT_EQ(line.find("\"" + mnt_), std::string::npos) << "the daemon looked into its own mount: " << line;
  }
  EXPECT_GT(lines, 10) << "the trace saw the daemon work";
}

}  // namespace
}  // namespace sbxit
