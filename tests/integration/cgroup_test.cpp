// Processes tracked by the kernel: a cgroup per command (where cgroup v2 is
// writable), and the process-tree tracking kept with -o cgroup=off.
//
// The cgroups are the daemon's own: every one of them lies below the
// subtree root status.json names (supervisor.cgroup), and after each test
// nothing of that subtree is left.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<pid_t> pids_in(const std::string& file) {
  std::vector<pid_t> out;
  std::istringstream in(read_file(file).data);
  pid_t p;
  while (in >> p) out.push_back(p);
  return out;
}

// "0::/PATH" of /proc/PID/cgroup.
std::string v2_cgroup_of(pid_t pid) {
  std::istringstream in(read_file("/proc/" + std::to_string(pid) + "/cgroup").data);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("0::", 0) == 0) return line.substr(3);
  return "";
}

/// A command whose last process did setsid, a double fork, closed every fd
/// and cleared its environment: it writes its pid to `pidfile`, then sleeps
/// `secs`. The command's root sleeps too (`root_secs`; 0: exits at once).
std::string escapee_request(const std::string& pidfile, int secs, int root_secs) {
  const std::string py =
      "import os\n"
      "if os.fork() == 0:\n"
      "    os.setsid()\n"
      "    if os.fork() == 0:\n"
      "        with open('" + pidfile + "', 'w') as f: f.write(str(os.getpid()))\n"
      "        os.closerange(0, 65536)\n"
      "        os.execve('/bin/sleep', ['sleep', '" + std::to_string(secs) + "'], {})\n"
      "    os._exit(0)\n";
  json req = {{"argv", {"/bin/sh", "-c", "\"$0\" -c \"$1\"; wait; sleep " + std::to_string(root_secs), python_path(), py}}};
  return req.dump();
}

/// Both trackings' tests: commands with an escapee.
class TrackingTest : public SbxfsTest {
 protected:
  /// Starts escapee_request(); `escapee` gets the escapee's pid once it
  /// runs. Returns the bgId ("" with a failure).
  std::string start_escapee(int secs, int root_secs, pid_t* escapee) {
    const std::string pidfile = dir_ + "/escapee";
    std::string id = start(escapee_request(pidfile, secs, root_secs));
    if (id.empty()) return id;
    if (!wait_until([&] { return pids_in(pidfile).size() == 1; }, 5s)) {
      ADD_FAILURE() << "the escapee did not start";
      return "";
    }
    *escapee = pids_in(pidfile)[0];
    return id;
  }
};

class CgroupTest : public TrackingTest {
 protected:
  void SetUp() override {
    SbxfsTest::SetUp();
    if (HasFatalFailure()) return;
    json sup = root_status()["supervisor"];
    if (sup["tracking"] != "cgroup")
      GTEST_SKIP() << "no writable cgroup v2 here (" << sup["cgroup"] << "): cgroup tracking not tested";
    subtree_ = sup["cgroup"].get<std::string>();
  }
  void TearDown() override {
    SbxfsTest::TearDown();
    if (subtree_.empty()) return;
    // Every command's cgroup is removed with its record, the subtree with the daemon.
    if (!wait_until([&] { return !exists(subtree_); }, 5s)) {
      ADD_FAILURE() << "cgroups left behind in " << subtree_ << ": " << ::testing::PrintToString(list_dir(subtree_));
      for (auto& c : list_dir(subtree_)) {
        if (c.rfind("cmd-", 0) != 0) continue;
        (void)write_file(subtree_ + "/" + c + "/cgroup.kill", "1");
        wait_until([&] { return rmdir_errno(subtree_ + "/" + c) == 0; }, 5s);
      }
      rmdir_errno(subtree_);
    }
  }
  /// Starts a request that should be refused; returns bash's stderr.
  std::string refused(const std::string& request) {
    auto r = bash("printf '%s\\n' \"$SBX_REQ\" > \"$MNT/cmd\"", 10, {{"SBX_REQ", request}});
    EXPECT_NE(r.code, 0) << "accepted: " << request;
    return r.err;
  }
  std::string subtree_;
};

TEST_F(CgroupTest, EveryRecordSaysHowItIsTracked) {
  std::string id = start(R"({"argv": ["sleep", "30"]})");
  ASSERT_FALSE(id.empty());
  json s = status_json(id);
  EXPECT_EQ(s["tracking"], "cgroup");
  ASSERT_TRUE(s["cgroup"].is_string());
  const std::string cg = s["cgroup"];
  EXPECT_EQ(cg.rfind(subtree_ + "/cmd-" + id + "-", 0), 0u) << cg;
  // The command's root is a member from its exec on.
  EXPECT_EQ(pids_in(cg + "/cgroup.procs"), std::vector<pid_t>{s["pid"].get<pid_t>()});
  // The root list says it too.
  bool listed = false;
  const json root = root_status();
  for (auto& e : root["procs"])
    if (e["bgId"] == id) listed = e["tracking"] == "cgroup";
  EXPECT_TRUE(listed) << root.dump();
  EXPECT_EQ(run("echo > \"$MNT/procs/$ID/stop\"", 10, {{"ID", id}}).code, 0);
  // Removed right after the end is written (a waiter is not kept for it).
  EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 5s)) << "the cgroup goes with the record's end";
  // The subtree stays for the next start, held by `live` while the daemon
  // runs (TearDown checks that both go with the daemon).
  EXPECT_TRUE(exists(subtree_ + "/live"));
  for (const std::string& e : list_dir(subtree_)) EXPECT_NE(e.rfind("cmd-", 0), 0u) << e << " is left";
}

TEST_F(CgroupTest, AProcessThatLeftEverythingBehindIsAMemberAndIsStopped) {
  pid_t escapee = 0;
  std::string id = start_escapee(60, 60, &escapee);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return read_file("/proc/" + std::to_string(escapee) + "/environ").data.empty(); }, 5s));
  json s = status_json(id);
  EXPECT_NE(::getsid(escapee), s["pid"].get<pid_t>()) << "it left the command's session";
  const std::string cg = s["cgroup"];
  std::vector<pid_t> members = pids_in(cg + "/cgroup.procs");
  EXPECT_NE(std::find(members.begin(), members.end(), escapee), members.end()) << "listed as the command's";
  const std::string rel = v2_cgroup_of(escapee);  // relative to the cgroup2 mount
  EXPECT_TRUE(!rel.empty() && cg.size() > rel.size() && cg.compare(cg.size() - rel.size(), rel.size(), rel) == 0)
      << rel << " vs " << cg;

  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 4.0) << "TERM reached every member: no grace needed";
  EXPECT_FALSE(pid_alive(escapee));
  s = status_json(id);
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["endReason"], "stopped");
  EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 5s));
}

// A command that makes a cgroup of its own below its cgroup (a container
// runtime does, or an sbxfs run as a command): a stop's TERM reaches the
// processes there too, not only the KILL after the grace.
TEST_F(CgroupTest, AStopReachesTheMembersOfCgroupsTheCommandMade) {
  const std::string said = dir_ + "/said", script = dir_ + "/nested.sh";
  ASSERT_EQ(write_file(script,
                       "cg=$(grep '^0::' /proc/self/cgroup | cut -d: -f3)\n"
                       "top=$(awk '$9 == \"cgroup2\" {print $5; exit}' /proc/self/mountinfo)\n"
                       "mkdir \"$top$cg/sub\" || exit 9\n"
                       "sh -c 'echo $$ > \"$1/sub/cgroup.procs\"; trap \"echo nested >> $2; exit 0\" TERM; "
                       "echo in > \"$2\"; while :; do sleep 0.05; done' x \"$top$cg\" \"$1\" &\n"
                       "trap 'exit 0' TERM\n"
                       "while :; do sleep 0.05; done\n",
                       O_WRONLY | O_CREAT),
            0);
  std::string id = start(R"({"argv": ["sh", ")" + script + R"(", ")" + said + R"("], "stopGraceSec": 20})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return read_file(said).data == "in\n"; }, 10s)) << log(id);
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 30, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 10.0) << "the nested process waited for the grace's KILL";
  EXPECT_EQ(read_file(said).data, "in\nnested\n");
}

// A process that a command run as root moves out of its cgroup is still
// the monitor's descendant: a stop ends it with SIGKILL once the cgroup is
// empty, not after the whole grace.
TEST_F(CgroupTest, AProcessMovedOutOfItsCgroupStillEndsWithTheStop) {
  const std::string pidfile = dir_ + "/moved";
  std::string id = start(R"({"cmd": "top=$(awk '$9 == \"cgroup2\" {print $5; exit}' /proc/self/mountinfo); )"
                         R"(sh -c 'echo $$ > \"$1/cgroup.procs\" && echo $$ > \"$2\" && exec sleep 600' x \"$top\" \")" +
                         pidfile + R"(\" & sleep 600", "stopGraceSec": 30})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return pids_in(pidfile).size() == 1; }, 10s)) << log(id);
  const pid_t moved = pids_in(pidfile)[0];
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 45, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 10.0) << "the moved process waited for the grace";
  EXPECT_TRUE(wait_until([&] { return !pid_alive(moved); }, 5s));
  EXPECT_EQ(status_json(id)["running"], false);
}

TEST_F(CgroupTest, RunningUntilTheLastMemberEnds) {
  // The root exits at once; a member that left its session and closed its
  // output lives on until the test ends it: the record runs until then.
  pid_t late = 0;
  std::string id = start_escapee(60, 0, &late);
  ASSERT_FALSE(id.empty());
  json s = status_json(id);
  const pid_t root = s["pid"];
  ASSERT_TRUE(wait_until([&] { return !pid_alive(root); }, 5s));
  EXPECT_TRUE(pid_alive(late));
  EXPECT_EQ(status_json(id)["running"], true) << "a member is left";
  ASSERT_EQ(::kill(late, SIGTERM), 0);
  wait_json(id, 10);  // returns on the event
  EXPECT_FALSE(pid_alive(late));
  s = status_json(id);
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["exitCode"], 0) << s.dump();
}

// A command that forks without end: a KILL or a TERM written to `signal`
// ends all of it, also what it forked while the signal went out (one read
// of the members, then their signals, missed those: 1 in 5 runs of a
// sanitizer build, 1 in 25 loaded). A stop after it would hide a miss.
TEST_F(CgroupTest, ASignalReachesWhatTheCommandForksMeanwhile) {
  for (const std::string sig : {"KILL", "TERM"})
    for (int i = 0; i < 8; ++i) {
      const std::string id = start("while :; do sleep 30 & done");
      ASSERT_FALSE(id.empty());
      const std::string cg = status_json(id)["cgroup"];
      ASSERT_TRUE(wait_until([&] { return read_file(cg + "/cgroup.procs").data.size() > 40; }, 5s)) << "it forks";
      ASSERT_EQ(run("echo $SIG > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}, {"SIG", sig}}).code, 0);
      const json w = wait_json(id, 5);
      ASSERT_EQ(w["stillRunning"], false) << sig << " " << i << ": members left: " << read_file(cg + "/cgroup.procs").data;
      EXPECT_EQ(w["proc"]["signal"], "SIG" + sig) << w.dump();
    }
}

TEST_F(CgroupTest, CpuComesFromTheCgroup) {
  std::string id = start("while :; do :; done");
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(wait_until([&] { return status_json(id)["cpu"].get<double>() > 10; }, 5s, 200ms))
      << status_json(id).dump();
}

TEST_F(CgroupTest, StopPausesWithTheFreezerAndContThaws) {
  const std::string ticks = dir_ + "/ticks";
  std::string id = start("while :; do echo x >> '" + ticks + "'; sleep 0.02; done");
  ASSERT_FALSE(id.empty());
  const std::string cg = status_json(id)["cgroup"];
  ASSERT_TRUE(wait_until([&] { return !read_file(ticks).data.empty(); }, 5s));
  ASSERT_EQ(run("echo STOP > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
  json s = status_json(id);
  EXPECT_EQ(s["state"], "paused");
  EXPECT_EQ(s["running"], true);
  ASSERT_TRUE(wait_until([&] { return read_file(cg + "/cgroup.events").data.find("frozen 1") != std::string::npos; }, 5s));
  const std::size_t frozen_at = read_file(ticks).data.size();
  ::usleep(200 * 1000);  // not a synchronisation: nothing may happen meanwhile
  EXPECT_EQ(read_file(ticks).data.size(), frozen_at) << "a frozen command does not run";

  ASSERT_EQ(run("echo CONT > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
  EXPECT_EQ(status_json(id)["state"], "running");
  EXPECT_TRUE(wait_until([&] { return read_file(ticks).data.size() > frozen_at; }, 5s)) << "thawed, it runs on";

  // A stop of a paused command thaws it to deliver the TERM.
  ASSERT_EQ(run("echo STOP > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
  EXPECT_EQ(r.code, 0);
  EXPECT_LT(r.seconds, 4.0);
  EXPECT_EQ(status_json(id)["endReason"], "stopped");
}

TEST_F(CgroupTest, LimitsNeedTheirControllers) {
  // This machine's cgroup v2 may offer none of them (a hybrid layout keeps
  // memory, cpu and pids on v1): each is then EINVAL, naming the controller.
  for (auto [key, value, controller] : {std::tuple{"memoryMax", "33554432", "memory"}, std::tuple{"cpuMax", "50", "cpu"},
                                        std::tuple{"pidsMax", "10", "pids"}}) {
    const std::string req = std::string(R"({"cmd": "true", "limits": {")") + key + "\": " + value + "}}";
    auto r = bash("printf '%s\\n' \"$SBX_REQ\" > \"$MNT/cmd\"", 10, {{"SBX_REQ", req}});
    if (r.code == 0) continue;  // enabled here
    EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << r.err;
    ASSERT_FALSE(errors().empty());
    const std::string line = errors().back().dump();
    EXPECT_NE(line.find(std::string("the ") + controller + " controller"), std::string::npos) << line;
  }
  EXPECT_NE(refused(R"({"cmd": "true", "limits": {"memMax": 1}})").find("Invalid argument"), std::string::npos);
  EXPECT_NE(refused(R"({"cmd": "true", "limits": {"pidsMax": 0}})").find("Invalid argument"), std::string::npos);
  EXPECT_NE(refused(R"({"cmd": "true", "limits": 5})").find("Invalid argument"), std::string::npos);
}

TEST_F(CgroupTest, AMemoryLimitExceededIsOomKilled) {
  const std::string req = json{{"argv", {python_path(), "-c", "b = bytearray(256 << 20); print(len(b))"}},
                               {"limits", {{"memoryMax", 32 << 20}}}}
                              .dump();
  auto r = bash("exec 3<>\"$MNT/cmd\" && printf '%s\\n' \"$SBX_REQ\" >&3 && read -r id <&3 && echo \"$id\"", 10,
                {{"SBX_REQ", req}});
  if (r.code != 0) GTEST_SKIP() << "the memory controller is not enabled for sbxfs's cgroups here: " << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  wait_json(id, 20);
  EXPECT_EQ(status_json(id)["endReason"], "oomKilled") << status_json(id).dump();
}

TEST_F(CgroupTest, APidsLimitRefusesForks) {
  const std::string req = json{{"cmd", "for i in 1 2 3 4 5 6 7 8; do sleep 3 & done; wait"}, {"limits", {{"pidsMax", 4}}}}.dump();
  auto r = bash("exec 3<>\"$MNT/cmd\" && printf '%s\\n' \"$SBX_REQ\" >&3 && read -r id <&3 && echo \"$id\"", 10,
                {{"SBX_REQ", req}});
  if (r.code != 0) GTEST_SKIP() << "the pids controller is not enabled for sbxfs's cgroups here: " << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  EXPECT_TRUE(wait_until([&] { return log(id).find("Resource temporarily unavailable") != std::string::npos ||
                                      log(id).find("retry") != std::string::npos; }, 5s))
      << log(id);
  run("echo > \"$MNT/procs/$ID/stop\"", 10, {{"ID", id}});
}

TEST_F(CgroupTest, ADaemonKilledWithNineTakesItsCommandsBack) {
  pid_t escapee = 0;
  std::string id = start_escapee(60, 60, &escapee);
  ASSERT_FALSE(id.empty());
  const std::string cg = status_json(id)["cgroup"];
  ASSERT_TRUE(restart_daemon());
  json s = status_json(id);
  EXPECT_EQ(s["running"], true);
  EXPECT_EQ(s["tracking"], "cgroup");
  EXPECT_EQ(s["cgroup"], cg);
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(pid_alive(escapee));
  EXPECT_EQ(status_json(id)["endReason"], "stopped");
  EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 5s));
}

TEST_F(CgroupTest, TheSubtreeIsHeldWhileTheDaemonThatTookItsCommandsBackRuns) {
  // The daemon that ends removes `live`; its commands hold the subtree. The
  // next one holds it again: it does not go with their last one.
  const std::string id = start("sleep 60");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  EXPECT_FALSE(exists(subtree_ + "/live"));
  ASSERT_TRUE(start_daemon()) << daemon_log();
  EXPECT_TRUE(exists(subtree_ + "/live"));
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  const std::string cg = status_json(id)["cgroup"];
  EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 5s));
  EXPECT_TRUE(exists(subtree_ + "/live"));
}

// The subtree is the state directory's, however its path is spelt: a
// daemon that reaches it through a link takes the subtree over (none is
// left behind with its `live`).
TEST_F(CgroupTest, ADaemonReachingTheStateDirectoryThroughALinkTakesItsSubtreeOver) {
  ASSERT_FALSE(start("sleep 30").empty());
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  const std::string link = dir_ + "/state-link";
  ASSERT_EQ(::symlink(state_.c_str(), link.c_str()), 0);
  ASSERT_TRUE(start_daemon({"--state-dir", link})) << daemon_log();
  EXPECT_EQ(root_status()["supervisor"]["cgroup"], subtree_);
}

TEST_F(CgroupTest, ARestartedDaemonNeverReusesTheNameOfACgroupItTookBack) {
  // The first start of each daemon: counted from 1 by both, the names met,
  // and the old monitor's removal (or the daemon's, of what it left) could
  // take the new command's cgroup.
  const std::string req = R"({"argv": ["sleep", "60"], "name": "again"})";
  ASSERT_EQ(start(req), "again");
  const std::string cg = status_json("again")["cgroup"];
  ASSERT_TRUE(restart_daemon());
  EXPECT_EQ(run("echo > \"$MNT/procs/again/stop\"", 20).code, 0);
  ASSERT_EQ(run("echo 'sleep 60' > \"$MNT/procs/again/cmd\"", 20).code, 0);  // run it again
  const json s = status_json("again");
  EXPECT_EQ(s["running"], true);
  EXPECT_NE(s["cgroup"], cg);
  EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 5s)) << "the old one goes";
  EXPECT_TRUE(exists(s["cgroup"].get<std::string>())) << "the new one stays";
  EXPECT_EQ(run("echo > \"$MNT/procs/again/stop\"", 20).code, 0);
}

TEST_F(CgroupTest, AMonitorKilledWithNineLeavesNoMemberBehind) {
  // Without the monitor (its subreaper), an escapee with no environment
  // and no session of the command's is found only through its cgroup.
  pid_t escapee = 0;
  std::string id = start_escapee(60, 60, &escapee);
  ASSERT_FALSE(id.empty());
  const std::string cg = status_json(id)["cgroup"];
  json m = parse_json(read_file(state_ + "/procs/" + id + "/monitor.json").data);
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["cgroup"], cg) << "the record keeps its cgroup";
  // The root sh has gone on to its own sleep (python and its first child are gone).
  auto comms = [&] {
    std::multiset<std::string> c;
    for (pid_t p : pids_in(cg + "/cgroup.procs")) c.insert(read_file("/proc/" + std::to_string(p) + "/comm").data);
    return c;
  };
  const std::multiset<std::string> settled{"sh\n", "sleep\n", "sleep\n"};
  ASSERT_TRUE(wait_until([&] { return comms() == settled; }, 5s)) << "members: " << comms().size();
  ASSERT_EQ(::kill(m["monitorPid"].get<pid_t>(), SIGKILL), 0);
  json s = wait_ended(id, 15s);
  EXPECT_EQ(s["endReason"], "unknown");
  EXPECT_FALSE(pid_alive(escapee)) << "the escapee outlived its monitor";
  // The root sh and its sleep, and the escapee.
  EXPECT_NE(s["endNote"].get<std::string>().find("3 process(es)"), std::string::npos) << s.dump();
  EXPECT_FALSE(exists(cg));
}

TEST_F(CgroupTest, AGivenHierarchyThatIsNoCgroupIsRefusedAtStart) {
  ASSERT_EQ(mkdir_errno(dir_ + "/mnt2"), 0);
  auto r = run_argv({SBXFS_PATH, "-f", "--state-dir", dir_ + "/state2", "-o", "cgroup=" + dir_, dir_ + "/mnt2"}, 10);
  EXPECT_NE(r.code, 0);
  EXPECT_NE((r.out + r.err).find("is not a directory of a cgroup v2 filesystem"), std::string::npos) << r.out << r.err;
  // The hierarchy found by itself, given by name, is the same.
  kill_daemon(SIGTERM);
  ASSERT_TRUE(start_daemon({"-o", "cgroup=" + subtree_.substr(0, subtree_.rfind('/'))}));
  EXPECT_EQ(root_status()["supervisor"]["cgroup"], subtree_);
}

// ---- -o cgroup=off: the process-tree tracking, unchanged ----

// Where clone3(2) is refused (a container's seccomp filter, a kernel before
// 5.3), a command's process cannot be born in its cgroup: it joins it by
// cgroup.procs before anything else, and everything else stays the same.
class CgroupWithoutClone3Test : public CgroupTest {
 protected:
  CgroupWithoutClone3Test() { daemon_wrapper_ = {WITHOUT_CLONE3_PATH}; }
};

TEST_F(CgroupWithoutClone3Test, TheCommandJoinsItsCgroupBeforeItsExec) {
  auto filtered = [](pid_t pid) {
    return read_file("/proc/" + std::to_string(pid) + "/status").data.find("Seccomp:\t2") != std::string::npos;
  };
  ASSERT_TRUE(filtered(root_status()["supervisor"]["pid"].get<pid_t>())) << "the daemon runs under the filter";
  // Its first instruction looks where it is.
  const std::string id = start(R"({"argv": ["/bin/sh", "-c", "grep '^0::' /proc/self/cgroup; exec sleep 30"]})");
  ASSERT_FALSE(id.empty());
  const json s = status_json(id);
  EXPECT_EQ(s["tracking"], "cgroup");
  const std::string cg = s["cgroup"];
  ASSERT_TRUE(wait_until([&] { return file("procs/" + id + "/log").find("0::") != std::string::npos; }, 5s));
  // Its grep may still be a member for a moment; then sh's exec leaves one.
  const std::vector<pid_t> only{s["pid"].get<pid_t>()};
  EXPECT_TRUE(wait_until([&] { return pids_in(cg + "/cgroup.procs") == only; }, 5s))
      << pids_in(cg + "/cgroup.procs").size() << " members";
  const std::string seen = file("procs/" + id + "/log");
  EXPECT_NE(seen.find(cg.substr(cg.find("/sbxfs-")) + "\n"), std::string::npos) << seen << " is not " << cg;
  const json m = parse_json(read_file(state_ + "/procs/" + id + "/monitor.json").data);
  EXPECT_TRUE(filtered(m["monitorPid"].get<pid_t>())) << "its monitor, too, has no clone3";
  EXPECT_EQ(run("echo > \"$MNT/procs/$ID/stop\"", 10, {{"ID", id}}).code, 0);
  EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 5s));
}

class ProcTreeTest : public TrackingTest {
 protected:
  ProcTreeTest() { daemon_options_ = {"-o", "cgroup=off"}; }
};

TEST_F(ProcTreeTest, EveryRecordSaysHowItIsTracked) {
  EXPECT_EQ(root_status()["supervisor"]["tracking"], "proctree");
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  json s = status_json(id);
  EXPECT_EQ(s["tracking"], "proctree");
  EXPECT_FALSE(s.contains("cgroup"));
}

TEST_F(ProcTreeTest, ASetsidDoubleForkIsStoppedWhileItsMonitorLives) {
  pid_t escapee = 0;
  std::string id = start_escapee(60, 60, &escapee);
  ASSERT_FALSE(id.empty());
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(pid_alive(escapee));
  EXPECT_EQ(status_json(id)["endReason"], "stopped");
}

TEST_F(ProcTreeTest, RunningUntilTheLastProcessEnds) {
  pid_t late = 0;
  std::string id = start_escapee(60, 0, &late);
  ASSERT_FALSE(id.empty());
  const pid_t root = status_json(id)["pid"];
  ASSERT_TRUE(wait_until([&] { return !pid_alive(root); }, 5s));
  EXPECT_EQ(status_json(id)["running"], true);
  ASSERT_EQ(::kill(late, SIGTERM), 0);
  wait_json(id, 10);
  EXPECT_FALSE(pid_alive(late));
  EXPECT_EQ(status_json(id)["exitCode"], 0);
}

TEST_F(ProcTreeTest, StopIsPausedAndContRuns) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const pid_t root = status_json(id)["pid"];
  ASSERT_EQ(run("echo STOP > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
  EXPECT_EQ(status_json(id)["state"], "paused");
  EXPECT_TRUE(wait_until([&] { return read_file("/proc/" + std::to_string(root) + "/stat").data.find(") T ") != std::string::npos; }, 5s));
  ASSERT_EQ(run("echo CONT > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
  EXPECT_EQ(status_json(id)["state"], "running");
}

TEST_F(ProcTreeTest, APausedCommandIsStillPausedAfterADaemonRestart) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const pid_t root = status_json(id)["pid"];
  ASSERT_EQ(run("echo STOP > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
  ASSERT_TRUE(wait_until([&] { return read_file("/proc/" + std::to_string(root) + "/stat").data.find(") T ") != std::string::npos; }, 5s));
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(start_daemon());
  EXPECT_EQ(status_json(id)["state"], "paused") << "its processes are still stopped";
  ASSERT_EQ(run("echo CONT > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
  EXPECT_EQ(status_json(id)["state"], "running");
  EXPECT_TRUE(wait_until([&] { return read_file("/proc/" + std::to_string(root) + "/stat").data.find(") S ") != std::string::npos; }, 5s));
}

TEST_F(ProcTreeTest, LimitsNeedCgroupTracking) {
  auto r = bash("printf '%s\\n' '{\"cmd\": \"true\", \"limits\": {\"pidsMax\": 5}}' > \"$MNT/cmd\"", 10);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << r.err;
  ASSERT_FALSE(errors().empty());
  EXPECT_NE(errors().back().dump().find("cgroup=off"), std::string::npos) << errors().back().dump();
}

TEST_F(ProcTreeTest, ADaemonKilledWithNineTakesItsCommandsBack) {
  std::string id = start("sleep 60");
  ASSERT_FALSE(id.empty());
  const pid_t root = status_json(id)["pid"];
  ASSERT_TRUE(restart_daemon());
  EXPECT_EQ(status_json(id)["tracking"], "proctree");
  EXPECT_EQ(run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}}).code, 0);
  EXPECT_FALSE(pid_alive(root));
}

}  // namespace
}  // namespace sbxit
