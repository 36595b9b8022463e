// A daemon killed (SIGKILL) while commands are queued: the next one loads
// them, starts them as places come free (also while it is still loading),
// and each that runs has its start step. Both faults were races: these
// tests repeat the moment many times rather than wait for it.
#include <signal.h>

#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class QueueCrashTest : public SbxfsTest {
 protected:
  QueueCrashTest() { daemon_options_ = {"-o", "max_running=20"}; }
};

// Commands taken back end while the new daemon is loading; their ends
// start what is queued, which once reached the monitor launcher before it
// was made (a crash of the new daemon, and a dead mount). The window was
// the end of the load, after the queued records: this scenario met it in
// 2 runs of 3 on a loaded machine, rarely on a quiet one.
TEST_F(QueueCrashTest, EndsDuringTheLoadStartWhatIsQueued) {
  // Ended records make the load last long enough for the ends to fall in it.
  ASSERT_EQ(python(R"(
import os
for i in range(300):
    fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
    os.write(fd, b'true\n')
    os.read(fd, 64)
    os.close(fd)
)", 120).code, 0);
  std::vector<std::string> running, queued;
  for (int i = 0; i < 20; ++i) {
    // Each ends 20 ms after the one before, once `go` exists.
    running.push_back(start("while [ ! -e \"$T/go\" ]; do sleep 0.01; done; sleep 0." + std::string(i < 5 ? "0" : "") +
                            std::to_string(i * 2)));
    ASSERT_FALSE(running.back().empty());
  }
  for (int i = 0; i < 20; ++i) {
    queued.push_back(start(R"({"cmd": "true", "queue": true})"));
    ASSERT_FALSE(queued.back().empty());
  }
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  for (const std::string& id : queued) EXPECT_EQ(wait_json(id, 30)["proc"]["exitCode"], 0) << id;
  for (const std::string& id : running) EXPECT_EQ(wait_json(id, 30)["proc"]["exitCode"], 0) << id;
}

// A queued request whose daemon is killed as it answers: a record that
// was kept (and so runs later) has its start step, written before the
// record was in procs/.
TEST_F(QueueCrashTest, AQueuedRecordThatSurvivesTheKillHasItsStartStep) {
  daemon_options_ = {"-o", "max_running=1"};
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  const std::string blocker = start("while [ ! -e \"$T/go\" ]; do sleep 0.01; done");
  ASSERT_FALSE(blocker.empty());
  for (int round = 0; round < 15; ++round) {
    // The request written, and the daemon killed 0 to 7 ms later: in
    // some rounds while it is taking the request in.
    const RunResult r = python(R"(
import os, threading, time
fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
def write():
    try: os.write(fd, b'{"cmd": "true", "queue": true}\n')
    except OSError: pass
t = threading.Thread(target=write)
t.start()
time.sleep(int(os.environ['ROUND']) * 0.0005)
os.kill(int(os.environ['DPID']), 9)
t.join()
)", 20, {{"ROUND", std::to_string(round)}, {"DPID", std::to_string(daemon_pid())}});
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
    ASSERT_TRUE(start_daemon()) << daemon_log();
  }
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  // Every queued record kept runs; each has its one start step.
  for (const std::string& id : procs()) {
    if (id == blocker) continue;
    EXPECT_EQ(wait_json(id, 30)["proc"]["exitCode"], 0) << id;
    int starts = 0;
    for (const json& s : parse_json(file("steps.json")))
      if (s.value("bgId", "") == id && s.value("kind", "") == "start") ++starts;
    EXPECT_EQ(starts, 1) << id << " ran; its start steps: " << starts;
  }
}

}  // namespace
}  // namespace sbxit
