// procs/ID/stop and procs/ID/signal.
#include <fcntl.h>
#include <signal.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using StopSignalTest = SbxfsTest;

std::vector<pid_t> read_pids(const std::string& path) {
  std::vector<pid_t> out;
  std::istringstream in(read_file(path).data);
  pid_t p;
  while (in >> p) out.push_back(p);
  return out;
}

TEST_F(StopSignalTest, StopReturnsOnceTheWholeTreeIsGone) {
  // A child in the group, a grandchild that left it with setsid, and the root.
  const std::string pids = dir_ + "/pids";
  std::string id = start("sleep 30 & echo $! >> '" + pids + "'; setsid sh -c 'echo $$ >> \"" + pids +
                         "\"; exec sleep 30' & sleep 30");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return read_pids(pids).size() == 2; }, 5s)) << read_file(pids).data;
  std::vector<pid_t> tree = read_pids(pids);
  auto s = status_json(id);
  ASSERT_TRUE(s["pid"].is_number_integer());
  tree.push_back(s["pid"].get<pid_t>());
  for (pid_t pid : tree) ASSERT_TRUE(pid_alive(pid)) << pid;
  // The setsid'd one really left the command's session.
  EXPECT_NE(::getsid(tree[1]), tree[2]);

  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 4.0) << "SIGTERM should have ended everything without the SIGKILL grace";
  // The write returned: nothing of the tree is left, no waiting here.
  for (pid_t pid : tree) EXPECT_FALSE(pid_alive(pid)) << "pid " << pid << " survived the stop";
  s = status_json(id);
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["state"], "exited");
  EXPECT_EQ(s["endReason"], "stopped");
  EXPECT_EQ(s["exitCode"], -1);
  EXPECT_EQ(s["signal"], "SIGTERM");
  EXPECT_EQ(s["timedOut"], false);
}

TEST_F(StopSignalTest, StopOfAnEndedCommandChangesNothing) {
  std::string id = start("exit 5");
  ASSERT_FALSE(id.empty());
  auto before = wait_ended(id);
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 2.0);
  auto after = status_json(id);
  EXPECT_EQ(after["exitCode"], 5);
  EXPECT_EQ(after["endReason"], "exited");
  EXPECT_EQ(after["finishedAt"], before["finishedAt"]);
}

TEST_F(StopSignalTest, StopByAnyWriteAndFromPython) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  auto r = python(R"(
import os
with open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/stop', 'w') as f:
    f.write('please\n')
)",
                  20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(status_json(id)["endReason"], "stopped");
}

TEST_F(StopSignalTest, AChildsCloseOfAnInheritedStopDescriptorIsNoStop) {
  // Python's descriptors are close-on-exec: a child closes its copy at its
  // exec; one passed to it is closed at its exit. Only the opener's own
  // close stops.
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  auto r = python(R"(
import json, os, subprocess
m = os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/'
f = open(m + 'stop', 'w')
subprocess.run(['/bin/true'], check=True)
os.set_inheritable(f.fileno(), True)
subprocess.run(['/bin/true'], check=True, pass_fds=[f.fileno()])
print(json.load(open(m + 'status.json'))['state'])
f.close()
print(json.load(open(m + 'status.json'))['endReason'])
)",
                  20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "running\nstopped\n");
}

TEST_F(StopSignalTest, InterruptedStopStillCompletes) {
  std::string id = start(R"({"cmd": "trap '' TERM; echo armed; sleep 30", "stopGraceSec": 8})");
  ASSERT_FALSE(id.empty());
  // Until the trap is set, a TERM would end it at once and nothing would block.
  ASSERT_TRUE(wait_until([&] { return log(id) == "armed\n"; }, 5s)) << log(id);
  pid_t root = status_json(id)["pid"].get<pid_t>();
  const pid_t writer = spawn_bg("echo > \"$MNT/procs/" + id + "/stop\"");
  // The stop is under way (its step is noted before the write is parked):
  // a signal now interrupts the write, not the open or a write not yet sent.
  ASSERT_TRUE(wait_until([&] { return has_step("stop", id); }, 10s)) << file("steps.json");
  ASSERT_EQ(::kill(-writer, SIGTERM), 0);
  EXPECT_EQ(wait_bg(writer, 5s), std::optional<int>(128 + SIGTERM)) << "the stop write should have been interrupted";
  // The command ignores TERM and lasts the 8 s grace: the write was
  // released by its signal, not by the end.
  EXPECT_TRUE(status_json(id)["running"].get<bool>()) << "the interrupted stop write was not released at once";
  auto s = wait_ended(id, 20s);
  EXPECT_EQ(s["endReason"], "stopped");
  EXPECT_EQ(s["signal"], "SIGKILL");
  EXPECT_FALSE(pid_alive(root));
}

// A command that stops itself with a TERM handler that cleans up: the
// write returns once the stop has begun, so the handler runs and the
// command ends by it, not by the SIGKILL after the grace. From the
// command's first process and from a process two levels below it.
class SelfStopTest : public SbxfsTest, public ::testing::WithParamInterface<const char*> {
 protected:
  SelfStopTest() {
    if (std::string(GetParam()) == "off") daemon_options_ = {"-o", "cgroup=off"};
  }
};
INSTANTIATE_TEST_SUITE_P(Tracking, SelfStopTest, ::testing::Values("", "off"),
                         [](const auto& info) { return std::string(info.param).empty() ? "cgroup" : "proctree"; });

TEST_P(SelfStopTest, ACommandThatStopsItselfEndsByItsOwnTermHandler) {
  ASSERT_EQ(write_file(dir_ + "/self-stop.sh",
                       "trap 'kill -KILL $! 2>/dev/null; echo cleaned; exit 7' TERM\n"
                       "echo > \"$SBX_MOUNT/procs/$SBX_BGID/stop\"\n"
                       "sleep 30 & wait\n",
                       O_WRONLY | O_CREAT | O_TRUNC),
            0);
  // The handler kills the `sleep` itself, with KILL: one forked just after
  // the stop's TERM went out gets none, and one forked just before it, not
  // yet exec'd, takes its TERM with the shell's handler it inherited and
  // then runs `sleep` with nothing pending (a signal trace showed both):
  // either would last until the grace.
  for (const std::string cmd : {"sh $T/self-stop.sh", "sh -c 'sh $T/self-stop.sh'"}) {
    const std::string id = start(json{{"cmd", cmd}, {"stopGraceSec", 30}}.dump());
    ASSERT_FALSE(id.empty());
    const json w = wait_json(id, 20);
    EXPECT_EQ(w["stillRunning"], false) << cmd << ": " << w.dump();
    EXPECT_EQ(w["proc"]["endReason"], "stopped") << cmd << ": " << w.dump();
    EXPECT_EQ(log(id), "cleaned\n") << cmd;
  }
  if (std::string(GetParam()) == "off" || root_status()["supervisor"]["tracking"] != "cgroup") return;
  // From a cgroup of its own below the command's (a command may make some).
  ASSERT_EQ(write_file(dir_ + "/sub-stop.sh",
                       "cg=$(sed -n 's/^ *\"cgroup\": *\"\\(.*\\)\",$/\\1/p' \"$SBX_MOUNT/procs/$SBX_BGID/status.json\")\n"
                       "mkdir \"$cg/sub\" && echo $$ > \"$cg/sub/cgroup.procs\" || exit 90\n"
                       "trap 'kill -KILL $! 2>/dev/null; wait; echo $$ > \"$cg/cgroup.procs\"; rmdir \"$cg/sub\"; "
                       "echo cleaned; exit 7' TERM\n"
                       "echo > \"$SBX_MOUNT/procs/$SBX_BGID/stop\"\n"
                       "sleep 30 & wait\n",
                       O_WRONLY | O_CREAT | O_TRUNC),
            0);
  const std::string id = start(json{{"cmd", "exec sh $T/sub-stop.sh"}, {"stopGraceSec", 30}}.dump());
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 20);
  EXPECT_EQ(w["stillRunning"], false) << w.dump();
  EXPECT_EQ(w["proc"]["exitCode"], 7) << w.dump() << log(id);
  EXPECT_EQ(log(id), "cleaned\n");
}

TEST_F(StopSignalTest, SignalByNumberNameAndSigname) {
  const std::string trap_script =
      "trap 'echo got USR1' USR1; trap 'echo got USR2' USR2; trap 'echo got HUP' HUP; "
      "echo ready; while :; do sleep 0.05; done";
  std::string id = start(trap_script);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id) == "ready\n"; }, 5s));
  auto send = [&](const std::string& text) {
    return bash("printf '%s' \"$SIG\" > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}, {"SIG", text}});
  };
  auto r = send(std::to_string(SIGUSR1) + "\n");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return log(id).find("got USR1") != std::string::npos; }, 5s)) << log(id);
  r = send("  usr2 \n");  // whitespace trimmed, case-insensitive
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return log(id).find("got USR2") != std::string::npos; }, 5s)) << log(id);
  r = send("SIGHUP");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(wait_until([&] { return log(id).find("got HUP") != std::string::npos; }, 5s)) << log(id);
  EXPECT_EQ(status_json(id)["running"], true) << "trapped signals leave the command running";
}

TEST_F(StopSignalTest, SignalReachesTheWholeTree) {
  const std::string pids = dir_ + "/pids";
  std::string id = start("sleep 30 & echo $! >> '" + pids + "'; setsid sh -c 'echo $$ >> \"" + pids +
                         "\"; exec sleep 30' & wait");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return read_pids(pids).size() == 2; }, 5s));
  auto tree = read_pids(pids);
  auto r = bash("echo TERM > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  for (pid_t pid : tree) EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 5s)) << pid;
  auto s = wait_ended(id);
  EXPECT_EQ(s["exitCode"], -1);
  EXPECT_EQ(s["signal"], "SIGTERM");
  EXPECT_EQ(s["endReason"], "killed") << "a signal other than stop/timeout";
}

// One write of `signal` is one signal for every process of the tree, the
// leader, a member of its group and one that left it with setsid, however
// the tree is tracked. A realtime signal is queued, never merged with one
// pending, so a second copy would be counted.
class SignalOnceTest : public SbxfsTest {
 protected:
  void expect_one_signal_a_write() {
    const std::string counter = dir_ + "/count.py";
    ASSERT_EQ(write_file(counter,
                         "import os, signal, sys\n"
                         "a, b = signal.SIGRTMIN + 1, signal.SIGRTMIN + 2\n"
                         "signal.pthread_sigmask(signal.SIG_BLOCK, {a, b})\n"
                         "say = lambda *w: os.write(1, (' '.join(map(str, w)) + '\\n').encode())  # one write a line\n"
                         "say('ready', sys.argv[1])\n"
                         "n = 0\n"
                         "while True:\n"
                         "    if signal.sigwaitinfo({a, b}).si_signo == a:\n"
                         "        n += 1\n"
                         "    else:\n"
                         "        say('count', sys.argv[1], n)\n",
                         O_WRONLY | O_CREAT | O_TRUNC),
              0);
    const std::string py = "python3 '" + counter + "' ";
    const std::string id = start(py + "member & setsid " + py + "apart & exec " + py + "leader");
    ASSERT_FALSE(id.empty());
    auto lines_with = [&](const std::string& word) {
      std::istringstream in(log(id));
      std::vector<std::string> out;
      for (std::string line; std::getline(in, line);)
        if (line.rfind(word, 0) == 0) out.push_back(line);
      return out;
    };
    ASSERT_TRUE(wait_until([&] { return lines_with("ready ").size() == 3; }, 10s)) << log(id);
    auto send = [&](int sig) {
      auto r = bash("echo $SIG > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}, {"SIG", std::to_string(sig)}});
      EXPECT_EQ(r.code, 0) << r.err;
    };
    for (int i = 0; i < 3; ++i) send(SIGRTMIN + 1);
    // Delivered after every lower one already queued: the count is complete.
    send(SIGRTMIN + 2);
    ASSERT_TRUE(wait_until([&] { return lines_with("count ").size() >= 3; }, 10s)) << log(id);
    std::vector<std::string> counts = lines_with("count ");
    std::sort(counts.begin(), counts.end());
    EXPECT_EQ(counts, (std::vector<std::string>{"count apart 3", "count leader 3", "count member 3"})) << log(id);
  }
};

class SignalOnceTreeTest : public SignalOnceTest {
 protected:
  SignalOnceTreeTest() { daemon_options_ = {"-o", "cgroup=off"}; }
};

// A STOP while a stop is under way would hold the tree (frozen, or
// stopped) until the grace's SIGKILL: EBUSY, and the command ends as its
// TERM handler says.
class StopDuringStopTest : public SbxfsTest {
 protected:
  void expect_stop_refused_during_a_stop(bool restart_in_grace = false) {
    // The TERM handler ends once the test says so: the stop is under way till then.
    const std::string id = start(R"({"cmd": "trap 'echo term; while [ ! -e \"$T/release\" ]; do sleep 0.02; done; exit 7' TERM; )"
                                 R"(echo up; while :; do sleep 0.05; done", "stopGraceSec": 30})");
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(wait_until([&] { return log(id) == "up\n"; }, 10s));
    const pid_t stopper = spawn_bg("echo > \"$MNT/procs/" + id + "/stop\"");
    ASSERT_GT(stopper, 0);
    ASSERT_TRUE(wait_until([&] { return log(id).find("\nterm\n") != std::string::npos; }, 10s)) << log(id);
    if (restart_in_grace) {
      // A stop that lasts leaves its mark in the record's folder: the next daemon knows it.
      ASSERT_TRUE(wait_until([&] { return stat_errno(state_ + "/procs/" + id + "/stopping") == 0; }, 5s));
      ASSERT_TRUE(restart_daemon());
    }
    auto r = bash("echo STOP > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}});
    EXPECT_NE(r.code, 0) << "a STOP during a stop was taken";
    EXPECT_NE(r.err.find("busy"), std::string::npos) << r.err;
    ASSERT_EQ(write_file(dir_ + "/release", "", O_WRONLY | O_CREAT), 0);
    // The stop's writer was answered by the daemon that died (an error), or by this one.
    const std::optional<int> stopped = wait_bg(stopper, 20s);
    if (!restart_in_grace) {
      EXPECT_EQ(stopped, std::optional<int>(0));
    }
    if (restart_in_grace) wait_json(id);
    const json st = status_json(id);
    EXPECT_EQ(st["exitCode"], 7) << st.dump();
    EXPECT_EQ(st["signal"], nullptr) << st.dump();
  }
  // The same when the stop is the monitor's own, a timeout's (of a command
  // paused before it, too: it is no longer paused; and after a daemon
  // restart in its grace): a STOP is EBUSY.
  void expect_stop_refused_during_a_timeout(bool paused_first, bool restart_in_grace) {
    const std::string id = start(R"({"cmd": "trap 'echo term; while [ ! -e \"$T/release\" ]; do sleep 0.02; done; exit 7' TERM; )"
                                 R"(echo up; while :; do sleep 0.05; done", "timeoutSec": 2, "stopGraceSec": 30})");
    ASSERT_FALSE(id.empty());
    ASSERT_TRUE(wait_until([&] { return log(id) == "up\n"; }, 10s));
    if (paused_first) {
      ASSERT_EQ(bash("echo STOP > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
      EXPECT_EQ(status_json(id)["state"], "paused");
    }
    ASSERT_TRUE(wait_until([&] { return log(id).find("\nterm\n") != std::string::npos; }, 10s)) << log(id);
    if (restart_in_grace) {
      ASSERT_TRUE(restart_daemon());
    }
    if (paused_first) {  // thawed for its TERM
      EXPECT_TRUE(wait_until([&] { return status_json(id)["state"] == "running"; }, 5s)) << status_json(id).dump();
    }
    auto r = bash("echo STOP > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}});
    EXPECT_NE(r.code, 0) << "a STOP during a timeout's stop was taken";
    EXPECT_NE(r.err.find("busy"), std::string::npos) << r.err;
    ASSERT_EQ(write_file(dir_ + "/release", "", O_WRONLY | O_CREAT), 0);
    const json w = wait_json(id);
    EXPECT_EQ(w["proc"]["exitCode"], 7) << w.dump();
    EXPECT_EQ(w["proc"]["endReason"], "timedOut") << w.dump();
  }
};
TEST_F(StopDuringStopTest, AStopSignalDuringAStopIsEbusyAfterADaemonRestart) {
  expect_stop_refused_during_a_stop(true);
}
TEST_F(StopDuringStopTest, AStopSignalDuringATimeoutsStopIsEbusy) { expect_stop_refused_during_a_timeout(false, false); }
TEST_F(StopDuringStopTest, APausedCommandThatTimesOutIsStoppingAlsoAfterADaemonRestart) {
  expect_stop_refused_during_a_timeout(true, true);
}
class StopDuringStopTreeTest : public StopDuringStopTest {
 protected:
  StopDuringStopTreeTest() { daemon_options_ = {"-o", "cgroup=off"}; }
};
TEST_F(StopDuringStopTest, AStopSignalDuringAStopIsEbusy) { expect_stop_refused_during_a_stop(); }
TEST_F(StopDuringStopTreeTest, AStopSignalDuringAStopIsEbusyTrackedAsAProcessTree) {
  expect_stop_refused_during_a_stop();
}
TEST_F(StopDuringStopTreeTest, AStopSignalDuringATimeoutsStopIsEbusyTrackedAsAProcessTree) {
  expect_stop_refused_during_a_timeout(false, true);
}

TEST_F(SignalOnceTest, EachWriteIsOneSignalForEveryProcess) { expect_one_signal_a_write(); }

TEST_F(SignalOnceTreeTest, EachWriteIsOneSignalForEveryProcessTrackedAsAProcessTree) {
  expect_one_signal_a_write();
}

TEST_F(StopSignalTest, BogusSignalIsEINVAL) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  for (std::string bogus : {"BOGUS", "SIGFOO", "12abc", "-3"}) {
    auto r = bash("echo \"$SIG\" > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}, {"SIG", bogus}});
    EXPECT_EQ(r.code, 1) << bogus;
    EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << bogus << ": " << r.err;
  }
  auto py = python(R"(
import os
fd = os.open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/signal', os.O_WRONLY)
try:
    os.write(fd, b'NOTASIGNAL\n'); print('ok')
except OSError as e:
    print(e.errno)
)",
                   20, {{"ID", id}});
  EXPECT_EQ(py.out, std::to_string(EINVAL) + "\n") << py.err;
  EXPECT_EQ(status_json(id)["running"], true);
  auto errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "EINVAL");
  EXPECT_EQ(errs.back()["path"], "procs/" + id + "/signal");
  EXPECT_TRUE(errs.back()["error"].is_string());
}

// More than 32 bytes is no signal, even a name with blanks around it.
TEST_F(StopSignalTest, AWriteLongerThan32BytesIsNoSignal) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  auto py = python(R"(
import os
fd = os.open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/signal', os.O_WRONLY)
for data in (b' ' * 28 + b'TERM\n', b' ' * 27 + b'CONT\n'):
    try:
        print(os.write(fd, data))
    except OSError as e:
        print(e.errno)
)",
                   20, {{"ID", id}});
  EXPECT_EQ(py.out, std::to_string(EINVAL) + "\n32\n") << py.err;
  EXPECT_EQ(status_json(id)["running"], true) << "no TERM was sent";
  const json errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "EINVAL");
  EXPECT_NE(errs.back()["error"].get<std::string>().find("at most 32 bytes"), std::string::npos) << errs.back();
}

TEST_F(StopSignalTest, ABufferedWritersRetryOfARefusedSignalIsOneLine) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const std::size_t before = errors().size();
  RunResult py = python_write("procs/" + id + "/signal", "NOPE\n");
  EXPECT_NE(py.err.find("Invalid argument"), std::string::npos) << py.err;
  std::vector<json> errs = errors();
  ASSERT_EQ(errs.size(), before + 1) << "one refusal, one line";
  EXPECT_EQ(errs.back()["request"], "NOPE\n");
  // Refused again on another open file: a line of its own.
  python_write("procs/" + id + "/signal", "NOPE\n");
  EXPECT_EQ(errors().size(), before + 2);
  EXPECT_EQ(status_json(id)["running"], true);
}

TEST_F(StopSignalTest, SignalAfterEndIsESRCH) {
  std::string id = start("true");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  auto r = bash("echo TERM > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("No such process"), std::string::npos) << r.err;
  auto py = python(R"(
import os
fd = os.open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/signal', os.O_WRONLY)
try:
    os.write(fd, b'15'); print('ok')
except OSError as e:
    print(e.errno)
)",
                   20, {{"ID", id}});
  EXPECT_EQ(py.out, std::to_string(ESRCH) + "\n") << py.err;
}

}  // namespace
}  // namespace sbxit
