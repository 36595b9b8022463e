// Restart policies (`restart`, `restartDelaySec`, `maxRestarts`): the
// command's monitor runs it again after it ended, with a doubling delay; a
// stop ends the policy at once, also during a delay; a daemon that died
// neither stops the policy nor loses its count. Each test runs with cgroup
// tracking (where cgroup v2 is writable) and with -o cgroup=off: between runs
// the cgroup is empty, which must not end the record.
#include <signal.h>
#include <sys/stat.h>

#include <sstream>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(read_file(path).data);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return out;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

// The parameter: "" (cgroup tracking where it can be had) or "off".
class RestartPolicyTest : public SbxfsTest, public ::testing::WithParamInterface<const char*> {
 protected:
  RestartPolicyTest() {
    if (std::string(GetParam()) == "off") daemon_options_ = {"-o", "cgroup=off"};
  }
  void SetUp() override {
    SbxfsTest::SetUp();
    if (HasFatalFailure()) return;
    const json sup = root_status()["supervisor"];
    if (std::string(GetParam()).empty() && sup["tracking"] != "cgroup")
      GTEST_SKIP() << "no writable cgroup v2 here (" << sup["cgroup"] << "): the -o cgroup=off run covers it";
  }
  std::string record(json req) { return start(req.dump()); }
  json stop(const std::string& id, double* seconds = nullptr) {
    auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
    EXPECT_EQ(r.code, 0) << r.err;
    if (seconds) *seconds = r.seconds;
    return status_json(id);
  }
  std::string runs_file() const { return dir_ + "/runs"; }
};

TEST_P(RestartPolicyTest, FailingThreeTimesWithMaxRestartsTwoEndsAfterThreeRuns) {
  const std::string id = record({{"cmd", "echo run $$ >> \"$RUNS\"; echo out; exit 3"},
                                 {"env", {{"RUNS", runs_file()}}},
                                 {"restart", "on-failure"},
                                 {"restartDelaySec", 0.1},
                                 {"maxRestarts", 2}});
  ASSERT_FALSE(id.empty());
  // wait answers once the policy is over, not at the first run's end.
  const json w = wait_json(id, 20);
  ASSERT_FALSE(w.is_discarded());
  EXPECT_EQ(w["stillRunning"], false);
  const json& proc = w["proc"];
  EXPECT_EQ(proc["state"], "exited");
  EXPECT_EQ(proc["running"], false);
  EXPECT_EQ(proc["restarts"], 2);
  EXPECT_EQ(proc["restart"], "on-failure");
  EXPECT_EQ(proc["exitCode"], 3);
  EXPECT_EQ(proc["endReason"], "exited");
  EXPECT_FALSE(proc.contains("restartAt"));
  const std::vector<std::string> runs = lines_of(runs_file());
  ASSERT_EQ(runs.size(), 3u);
  // pid is the latest run's.
  EXPECT_EQ(runs.back(), "run " + std::to_string(proc["pid"].get<int>()));
  // One log, a marker line between the runs.
  const std::string l = log(id);
  EXPECT_EQ(count_of(l, "out\n"), 3u) << l;
  EXPECT_EQ(count_of(l, "[sbxfs: exited with code 3; restart "), 2u) << l;
  EXPECT_NE(l.find("restart 1 of 2 in 0.1 s]\n"), std::string::npos) << l;
  EXPECT_NE(l.find("restart 2 of 2 in 0.2 s]\n"), std::string::npos) << l;
  // stdout shows the marker lines too; events name them `restart`.
  EXPECT_EQ(count_of(file("procs/" + id + "/stdout"), "[sbxfs: exited"), 2u);
  std::vector<json> restarts;
  std::istringstream ev(file("procs/" + id + "/events"));
  std::string line;
  while (std::getline(ev, line)) {
    const json e = parse_json(line);
    ASSERT_FALSE(e.is_discarded()) << line;
    if (e["type"] == "restart") restarts.push_back(e);
    EXPECT_NE(e["type"], "truncated") << line;
  }
  ASSERT_EQ(restarts.size(), 2u);
  EXPECT_EQ(restarts[0]["data"], "[sbxfs: exited with code 3; restart 1 of 2 in 0.1 s]");
  EXPECT_TRUE(is_iso_time(restarts[0]["timestamp"]));
}

// The marker goes on a line of its own in each stream: the newline that
// ends a run's unfinished last line is that line's stream's, and the other
// stream, whose line was complete, shows no empty line (audit).
TEST_P(RestartPolicyTest, AMarkerAfterAnUnfinishedLineLeavesTheOtherStreamWithoutAnEmptyLine) {
  const std::string id = record({{"cmd", "echo out; printf errnonl >&2; exit 3"},
                                 {"restart", "on-failure"},
                                 {"restartDelaySec", 0.1},
                                 {"maxRestarts", 1}});
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 20);
  ASSERT_EQ(w["proc"]["restarts"], 1) << w.dump();
  const std::string marker = "[sbxfs: exited with code 3; restart 1 of 1 in 0.1 s]\n";
  const std::string out = file("procs/" + id + "/stdout");
  const std::string err = file("procs/" + id + "/stderr");
  const std::string l = log(id);
  EXPECT_EQ(out, "out\n" + marker + "out\n");
  EXPECT_EQ(err, "errnonl\n" + marker + "errnonl");
  EXPECT_EQ(l.find("\n\n"), std::string::npos) << l;
  EXPECT_NE(l.find("errnonl\n" + marker), std::string::npos) << l;
  // The events' data, in order, is still the log.
  std::string data;
  std::istringstream ev(file("procs/" + id + "/events"));
  for (std::string line; std::getline(ev, line);) {
    const json e = parse_json(line);
    ASSERT_FALSE(e.is_discarded()) << line;
    if (e["type"] == "restart") data += e["data"].get<std::string>() + "\n";
    else if (e.contains("data")) data += e["data"].get<std::string>();
  }
  EXPECT_EQ(data, l);
}

TEST_P(RestartPolicyTest, OnFailureEndsWithExitZero) {
  const std::string id = record({{"cmd", "echo run >> \"$RUNS\"; [ $(wc -l < \"$RUNS\") -ge 2 ] && exit 0; exit 1"},
                                 {"env", {{"RUNS", runs_file()}}},
                                 {"restart", "on-failure"},
                                 {"restartDelaySec", 0.1}});
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 20);
  ASSERT_FALSE(w.is_discarded());
  EXPECT_EQ(w["proc"]["exitCode"], 0);
  EXPECT_EQ(w["proc"]["restarts"], 1);
  EXPECT_EQ(lines_of(runs_file()).size(), 2u) << "a run that exited with 0 ends an on-failure policy";
}

TEST_P(RestartPolicyTest, AlwaysRestartsAfterExitZeroAndStopEndsIt) {
  const std::string id = record({{"cmd", "echo run >> \"$RUNS\"; [ $(wc -l < \"$RUNS\") -ge 3 ] && exec sleep 30; exit 0"},
                                 {"env", {{"RUNS", runs_file()}}},
                                 {"restart", "always"},
                                 {"restartDelaySec", 0.1}});
  ASSERT_FALSE(id.empty());
  // The third run is published before it runs: it is under way once it has written its line.
  ASSERT_TRUE(wait_until([&] {
    return lines_of(runs_file()).size() == 3 && status_json(id)["restarts"] == 2 && status_json(id)["state"] == "running";
  }, 10s)) << status_json(id).dump();
  const json s = status_json(id);
  EXPECT_EQ(s["running"], true);
  EXPECT_TRUE(pid_alive(s["pid"].get<pid_t>()));
  // The stop of a running run ends the policy: nothing more runs.
  const json after = stop(id);
  EXPECT_EQ(after["state"], "exited");
  EXPECT_EQ(after["endReason"], "stopped");
  EXPECT_EQ(after["restarts"], 2);
  EXPECT_FALSE(pid_alive(s["pid"].get<pid_t>()));
  EXPECT_EQ(lines_of(runs_file()).size(), 3u);
}

TEST_P(RestartPolicyTest, StopDuringTheDelayEndsThePolicyAtOnce) {
  const std::string id = record({{"cmd", "echo run >> \"$RUNS\"; exit 1"},
                                 {"env", {{"RUNS", runs_file()}}},
                                 {"restart", "always"},
                                 {"restartDelaySec", 30}});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return status_json(id)["state"] == "restarting"; }, 10s)) << status_json(id).dump();
  const json waiting = status_json(id);
  EXPECT_EQ(waiting["running"], true) << "the policy runs: wait blocks, the record is listed";
  EXPECT_EQ(waiting["restarts"], 0);
  EXPECT_TRUE(is_iso_time(waiting["restartAt"])) << waiting.dump();
  EXPECT_FALSE(waiting.contains("exitCode"));
  const json root = root_status();
  ASSERT_EQ(root["procs"].size(), 1u);
  EXPECT_EQ(root["procs"][0]["state"], "restarting");
  // A wait capped at 1 s: still running.
  auto capped = run("cat \"$MNT/procs/$ID/wait,timeoutSec=1\"", 10, {{"ID", id}});
  EXPECT_EQ(parse_json(capped.out)["stillRunning"], true) << capped.out;

  double took = 0;
  const json after = stop(id, &took);
  EXPECT_LT(took, 3.0) << "the stop write returns at once: nothing runs";
  EXPECT_EQ(after["state"], "exited");
  EXPECT_EQ(after["running"], false);
  EXPECT_EQ(after["endReason"], "stopped");
  EXPECT_EQ(after["exitCode"], 1) << "the last run's";
  EXPECT_EQ(after["restarts"], 0);
  EXPECT_FALSE(after.contains("restartAt"));
  const json w = wait_json(id, 5);
  EXPECT_EQ(w["stillRunning"], false);
  // Nothing runs after: the monitor that would start it is gone.
  const json mon = parse_json(read_file(state_ + "/procs/" + id + "/monitor.json").data);
  ASSERT_TRUE(mon.contains("monitorPid")) << mon.dump();
  EXPECT_TRUE(wait_until([&] { return !pid_alive(mon["monitorPid"].get<pid_t>()); }, 5s));
  // The monitor removes the cgroup about a millisecond after it wrote the
  // end (sbxfs.5), then exits: a loaded machine may run it later.
  if (after.contains("cgroup")) {
    const std::string cg = after["cgroup"];
    EXPECT_TRUE(wait_until([&] { return !exists(cg); }, 5s)) << "removed with the record's end";
  }
  EXPECT_EQ(lines_of(runs_file()).size(), 1u);
}

TEST_P(RestartPolicyTest, TheMarkerTellsTheDelayInSecondsAsGiven) {
  const std::string id = record({{"cmd", "exit 1"}, {"restart", "always"}, {"restartDelaySec", 1234.5}});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id).find("restart 1") != std::string::npos; }, 10s)) << log(id);
  EXPECT_NE(log(id).find("[sbxfs: exited with code 1; restart 1 in 1234.5 s]"), std::string::npos) << log(id);
  EXPECT_EQ(stop(id)["endReason"], "stopped");
}

TEST_P(RestartPolicyTest, StopDuringTheDelayAfterATimeoutIsAStop) {
  const std::string id = record({{"cmd", "sleep 30"},
                                 {"restart", "on-failure"},
                                 {"restartDelaySec", 30},
                                 {"timeoutSec", 0.3}});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return status_json(id)["state"] == "restarting"; }, 10s)) << status_json(id).dump();
  EXPECT_NE(log(id).find("[sbxfs: timedOut (SIGTERM); restart 1 in 30 s]"), std::string::npos) << log(id);
  const json after = stop(id);
  EXPECT_EQ(after["endReason"], "stopped") << after.dump();
  EXPECT_EQ(after["timedOut"], false) << after.dump();
  EXPECT_EQ(after["signal"], "SIGTERM") << "the last run's";
  EXPECT_EQ(wait_json(id, 5)["proc"]["endReason"], "stopped");
}

TEST_P(RestartPolicyTest, AlwaysRestartedAfterAKillWhileTheDaemonIsDown) {
  const std::string id = record({{"cmd", "echo $$ >> \"$RUNS\"; exec sleep 30"},
                                 {"env", {{"RUNS", runs_file()}}},
                                 {"restart", "always"},
                                 {"restartDelaySec", 0.2}});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return lines_of(runs_file()).size() == 1; }, 5s));
  const pid_t first = status_json(id)["pid"].get<pid_t>();
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  // The monitor runs the policy: a new run without any daemon.
  ASSERT_TRUE(wait_until([&] { return lines_of(runs_file()).size() == 2; }, 10s));
  const pid_t second = std::stoi(lines_of(runs_file())[1]);
  ASSERT_TRUE(start_daemon());
  json s = status_json(id);
  EXPECT_EQ(s["state"], "running");
  EXPECT_EQ(s["restarts"], 1);
  EXPECT_EQ(s["pid"], second);
  EXPECT_TRUE(pid_alive(second));
  // The re-adopted record follows the next runs too.
  ASSERT_EQ(::kill(second, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return status_json(id)["restarts"] == 2 && status_json(id)["state"] == "running"; }, 10s))
      << status_json(id).dump();
  EXPECT_NE(log(id).find("[sbxfs: killed (SIGKILL); restart 1 in 0.2 s]"), std::string::npos) << log(id);
  const json after = stop(id);
  EXPECT_EQ(after["endReason"], "stopped");
  EXPECT_EQ(after["restarts"], 2);
}

TEST_P(RestartPolicyTest, EachRunKilledAfterItsTimeoutIsRunAgainAndTimedOut) {
  // TERM is ignored, so each run's timeout ends in the kill after the grace
  // (cgroup.kill with cgroup tracking): the next run must still start and
  // run, and its end is its timeout's, as the first one's is.
  const std::string id = record({{"cmd", "trap '' TERM; echo $$ >> \"$RUNS\"; sleep 30"},
                                 {"env", {{"RUNS", runs_file()}}},
                                 {"restart", "always"},
                                 {"restartDelaySec", 0.1},
                                 {"maxRestarts", 2},
                                 {"timeoutSec", 0.5},
                                 {"stopGraceSec", 0.2}});
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 30)["proc"];
  EXPECT_EQ(lines_of(runs_file()).size(), 3u) << "every run ran its command: " << log(id);
  EXPECT_EQ(w["restarts"], 2);
  EXPECT_EQ(w["endReason"], "timedOut") << w.dump();
  EXPECT_EQ(w["timedOut"], true);
  EXPECT_EQ(w["signal"], "SIGKILL");
  EXPECT_EQ(count_of(log(id), "[sbxfs: timedOut (SIGKILL); restart "), 2u) << log(id);
}

TEST_P(RestartPolicyTest, ARunThatCannotStartIsAFailedRun) {
  // The first run makes its working directory unusable for the next ones.
  const std::string cwd = dir_ + "/work";
  ASSERT_EQ(mkdir_errno(cwd), 0);
  const std::string id = record({{"cmd", "rmdir \"$PWD\"; exit 1"},
                                 {"cwd", cwd},
                                 {"restart", "on-failure"},
                                 {"restartDelaySec", 0.1},
                                 {"maxRestarts", 1}});
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 20);
  ASSERT_FALSE(w.is_discarded());
  EXPECT_EQ(w["proc"]["restarts"], 1);
  EXPECT_EQ(w["proc"]["exitCode"], 127);
  EXPECT_NE(log(id).find("[sbxfs: restart 1: cannot change to '" + cwd + "'"), std::string::npos) << log(id);
}

INSTANTIATE_TEST_SUITE_P(Tracking, RestartPolicyTest, ::testing::Values("", "off"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param).empty() ? std::string("cgroup") : std::string("proctree");
                         });

using RestartBackoffTest = SbxfsTest;

TEST_F(RestartBackoffTest, TheDelayDoublesAfterShortRuns) {
  const std::string runs = dir_ + "/runs";
  const std::string id = start(json({{"cmd", "date +%s.%N >> \"$RUNS\"; exit 1"},
                                     {"env", {{"RUNS", runs}}},
                                     {"restart", "on-failure"},
                                     {"restartDelaySec", 1},
                                     {"maxRestarts", 2}})
                                   .dump());
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 20);
  ASSERT_FALSE(w.is_discarded());
  EXPECT_EQ(w["proc"]["restarts"], 2);
  const std::vector<std::string> t = lines_of(runs);
  ASSERT_EQ(t.size(), 3u);
  const double gap1 = std::stod(t[1]) - std::stod(t[0]), gap2 = std::stod(t[2]) - std::stod(t[1]);
  EXPECT_GE(gap1, 0.9);
  EXPECT_LT(gap1, 1.8);
  EXPECT_GE(gap2, 1.8) << "doubled after a short run";
  EXPECT_LT(gap2, 5.0);
}

TEST_F(RestartBackoffTest, BadValuesAreRefusedWithALineInErrors) {
  for (const char* req : {R"({"cmd": "true", "restart": "sometimes"})", R"({"cmd": "true", "restartDelaySec": 0})",
                          R"({"cmd": "true", "maxRestarts": -2})"}) {
    auto r = bash("echo \"$REQ\" > \"$MNT/cmd\"", 10, {{"REQ", req}});
    EXPECT_NE(r.code, 0) << req;
    EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << req << ": " << r.err;
  }
  const std::vector<json> errs = errors();
  ASSERT_GE(errs.size(), 3u);
  EXPECT_NE(errs[errs.size() - 3].dump().find("'restart'"), std::string::npos) << errs[errs.size() - 3].dump();
  EXPECT_NE(errs[errs.size() - 2].dump().find("'restartDelaySec'"), std::string::npos);
  EXPECT_NE(errs[errs.size() - 1].dump().find("'maxRestarts'"), std::string::npos);
  EXPECT_TRUE(procs().empty()) << "nothing was started";
}

}  // namespace
}  // namespace sbxit
