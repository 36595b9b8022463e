// `queue: true`: a request past max_running is accepted as `queued` (its
// bgId at once, its record on disk), and queued commands start in order as
// running ones end, also after a daemon restart; a queued command that is
// stopped never runs. Without it, EAGAIN as before. With cgroup tracking
// (where cgroup v2 is writable) and with -o cgroup=off.
#include <signal.h>
#include <sys/syscall.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class QueueTest : public SbxfsTest, public ::testing::WithParamInterface<const char*> {
 protected:
  QueueTest() {
    daemon_options_ = {"-o", std::string("max_running=2") + (std::string(GetParam()) == "off" ? ",cgroup=off" : "")};
  }
  void SetUp() override {
    SbxfsTest::SetUp();
    if (HasFatalFailure()) return;
    if (std::string(GetParam()).empty() && root_status()["supervisor"]["tracking"] != "cgroup")
      GTEST_SKIP() << "no writable cgroup v2 here: the -o cgroup=off run covers it";
  }
  /// Runs until the file `name` (in the test's dir) exists.
  std::string blocker(const std::string& name) {
    return start("while [ ! -e '" + dir_ + "/" + name + "' ]; do sleep 0.02; done");
  }
  void release(const std::string& name) { ASSERT_EQ(write_file(dir_ + "/" + name, "", O_WRONLY | O_CREAT), 0); }
  /// A queued request that appends `n` to the order file.
  std::string queued(int n) {
    return start(json({{"cmd", "echo " + std::to_string(n) + " >> \"$ORDER\""},
                       {"env", {{"ORDER", order_file()}}},
                       {"queue", true}})
                     .dump());
  }
  std::string order_file() const { return dir_ + "/order"; }
  json stop(const std::string& id) {
    auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
    EXPECT_EQ(r.code, 0) << r.err;
    return status_json(id);
  }
};

TEST_P(QueueTest, FiveQueuedBehindMaxRunningTwoRunInOrder) {
  const std::string a = blocker("go-a"), b = blocker("go-b");
  ASSERT_FALSE(a.empty() || b.empty());
  // Without queue: EAGAIN, as before.
  auto refused = bash("echo 'true' > \"$MNT/cmd\"");
  EXPECT_NE(refused.err.find("Resource temporarily unavailable"), std::string::npos) << refused.err;
  std::vector<std::string> q;
  for (int n = 1; n <= 5; ++n) q.push_back(queued(n));
  for (const std::string& id : q) {
    ASSERT_FALSE(id.empty());
    const json s = status_json(id);
    EXPECT_EQ(s["state"], "queued") << s.dump();
    EXPECT_EQ(s["running"], false);
    EXPECT_TRUE(s["pid"].is_null());
    EXPECT_TRUE(s["startedAt"].is_null());
    EXPECT_FALSE(s.contains("exitCode")) << "not ended";
  }
  // The root list shows them, not running: after the running ones, in the
  // queue's order.
  const json root = root_status();
  ASSERT_EQ(root["procs"].size(), 7u) << root.dump();
  std::vector<std::string> listed;
  for (const json& e : root["procs"]) {
    listed.push_back(e["bgId"]);
    if (e["state"] == "queued") {
      EXPECT_EQ(e["running"], false);
    }
  }
  const std::vector<std::string> in_order{a, b, q[0], q[1], q[2], q[3], q[4]};
  EXPECT_EQ(listed, in_order) << root.dump();
  // One place comes free (b keeps the other): they run one at a time, in order.
  release("go-a");
  const json w = wait_json(q.back(), 20);
  ASSERT_FALSE(w.is_discarded());
  EXPECT_EQ(w["stillRunning"], false);
  EXPECT_EQ(w["proc"]["exitCode"], 0);
  EXPECT_EQ(read_file(order_file()).data, "1\n2\n3\n4\n5\n");
  for (const std::string& id : q) EXPECT_EQ(status_json(id)["endReason"], "exited");
  EXPECT_EQ(status_json(b)["state"], "running");
  release("go-b");
  wait_ended(b);
}

TEST_P(QueueTest, AStoppedQueuedCommandNeverRuns) {
  const std::string a = blocker("go-a"), b = blocker("go-b");
  ASSERT_FALSE(a.empty() || b.empty());
  const std::string q1 = queued(1), q2 = queued(2);
  ASSERT_FALSE(q1.empty() || q2.empty());
  // A follower of its events, there before the stop: it ends after the
  // terminal event.
  const std::string followed = dir_ + "/followed";
  const pid_t follower = spawn_bg("exec cat \"$MNT/procs/" + q1 + "/events,follow\"", followed);
  ASSERT_GT(follower, 0);
  ASSERT_TRUE(wait_until([&] { return read_file("/proc/" + std::to_string(follower) + "/wchan").data == "request_wait_answer"; }, 5s))
      << "the follower blocks in its read";
  const json s = stop(q1);
  EXPECT_EQ(s["state"], "exited");
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["endReason"], "stopped");
  EXPECT_EQ(s["exitCode"], -1);
  EXPECT_TRUE(s["pid"].is_null());
  EXPECT_TRUE(s["startedAt"].is_null());
  EXPECT_TRUE(is_iso_time(s["finishedAt"]));
  EXPECT_EQ(wait_bg(follower, 5s), 0) << "the follower ended by itself";
  for (const std::string& events : {read_file(followed).data, file("procs/" + q1 + "/events")}) {
    ASSERT_TRUE(events.ends_with("\n") && events.find('\n') == events.size() - 1) << "one event: " << events;
    const json e = json::parse(events);
    EXPECT_EQ(e["type"], "terminal") << events;
    EXPECT_EQ(e["state"], "exited");
    EXPECT_EQ(e["endReason"], "stopped");
    EXPECT_EQ(e["exit"]["code"], -1);
    // Nothing after it.
    EXPECT_EQ(file("procs/" + q1 + "/events,since=" + e["cursor"].get<std::string>()), "");
  }
  // Its wait answers at once.
  const json w = wait_json(q1, 5);
  EXPECT_EQ(w["stillRunning"], false);
  EXPECT_EQ(w["proc"]["endReason"], "stopped");
  // The next one in the queue takes the place; the stopped one never ran.
  release("go-a");
  EXPECT_EQ(wait_json(q2, 20)["proc"]["exitCode"], 0);
  EXPECT_EQ(read_file(order_file()).data, "2\n");
  EXPECT_EQ(status_json(q1)["endReason"], "stopped");
  release("go-b");
  wait_ended(b);
}

TEST_P(QueueTest, ARestartedDaemonStartsWhatIsQueued) {
  const std::string a = blocker("go-a"), b = blocker("go-b");
  ASSERT_FALSE(a.empty() || b.empty());
  const std::string q1 = queued(1), q2 = queued(2), q3 = queued(3);
  ASSERT_FALSE(q1.empty() || q2.empty() || q3.empty());
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  // Both places come free while no daemon runs: nothing starts the queue yet.
  release("go-a");
  release("go-b");
  ASSERT_TRUE(start_daemon());
  // The new daemon found them on disk, queued, and starts them in order.
  const json w = wait_json(q3, 20);
  ASSERT_FALSE(w.is_discarded());
  EXPECT_EQ(w["proc"]["exitCode"], 0);
  // 3 may end before 2 (or 1): each is waited for.
  for (const std::string& id : {q1, q2, q3}) EXPECT_EQ(wait_ended(id, 20s)["state"], "exited");
  // Each ran once. Their lines' order says nothing: 3 may write before 2.
  std::string order = read_file(order_file()).data;
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, "\n\n\n123") << read_file(order_file()).data;
  // Two places: 1 and 2 start together, 3 only after one of them ended
  // (started first, 3 would not have waited for an end). startedAt is the
  // monitor's clock, read in its own start: a slow monitor of 2 may read a
  // later time than that of 3, started once 1 ended (CI, 2026-12-03).
  // The times are ISO strings of one format, so they compare as strings.
  const json s1 = status_json(q1), s2 = status_json(q2), s3 = status_json(q3);
  const std::string first_end = std::min(s1["finishedAt"].get<std::string>(), s2["finishedAt"].get<std::string>());
  EXPECT_GE(s3["startedAt"].get<std::string>(), first_end) << s1.dump() << s2.dump() << s3.dump();
  EXPECT_EQ(wait_ended(a, 20s)["running"], false);
}

TEST_P(QueueTest, ADaemonKilledWhileItStartsAQueuedCommandLosesNothing) {
  // The daemon removes the record's `queued` file as it lets the command
  // go; killed just then (its unlink held 3 s by strace), the record must
  // be there after the restart, its command run exactly once.
  const std::string a = blocker("go-a"), b = blocker("go-b");
  ASSERT_FALSE(a.empty() || b.empty());
  const std::string q1 = queued(1);
  ASSERT_FALSE(q1.empty());
  const std::string queued_file = state_ + "/procs/" + q1 + "/queued";
  ASSERT_EQ(stat_errno(queued_file), 0);
  std::string why;
  const pid_t tracer =
      trace_daemon("-P '" + queued_file + "' -e trace=/^unlink -e inject=/^unlink:delay_exit=3000000 -o /dev/null", why);
  if (tracer < 0) GTEST_SKIP() << "strace cannot trace the daemon here: " << why;
  release("go-a");
  ASSERT_TRUE(wait_until([&] { return stat_errno(queued_file) == ENOENT; }, 10s));
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ::kill(tracer, SIGKILL);
  wait_bg(tracer, 5s);
  ASSERT_TRUE(start_daemon());
  const json w = wait_json(q1, 20);
  ASSERT_TRUE(w.is_object()) << "the record is gone";
  EXPECT_EQ(w["proc"]["exitCode"], 0) << w.dump();
  EXPECT_TRUE(wait_until([&] { return read_file(order_file()).data == "1\n"; }, 5s)) << read_file(order_file()).data;
  release("go-b");
  wait_ended(b);
}

TEST_P(QueueTest, AQueuedCommandSurvivesADaemonRestartAndCanBeStopped) {
  const std::string a = blocker("go-a"), b = blocker("go-b");
  ASSERT_FALSE(a.empty() || b.empty());
  const std::string q1 = queued(1);
  ASSERT_FALSE(q1.empty());
  ASSERT_TRUE(restart_daemon());
  json s = status_json(q1);
  EXPECT_EQ(s["state"], "queued") << s.dump();
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(stop(q1)["endReason"], "stopped");
  release("go-a");
  release("go-b");
  wait_ended(a);
  wait_ended(b);
  EXPECT_EQ(read_file(order_file()).err, ENOENT) << "the stopped one never ran";
}

// A queued start's step stays open until that run ends, and says how it
// ended: also the run of a named slot whose last run had ended otherwise.
TEST_P(QueueTest, AQueuedStartsStepSaysHowItsRunEnded) {
  ASSERT_EQ(start(R"({"cmd": "exit 5", "name": "ns"})"), "ns");
  EXPECT_EQ(wait_json("ns")["proc"]["exitCode"], 5);
  const std::string a = blocker("a"), b = blocker("b");
  ASSERT_EQ(run(R"(printf '%s\n' '{"cmd": "exit 3", "queue": true}' > "$MNT/procs/ns/cmd")").code, 0);
  EXPECT_EQ(status_json("ns")["state"], "queued");
  const std::string q = start(R"({"cmd": "exit 4", "queue": true})");
  ASSERT_FALSE(q.empty());
  release("a");
  release("b");
  EXPECT_EQ(wait_json("ns")["proc"]["exitCode"], 3);
  EXPECT_EQ(wait_json(q)["proc"]["exitCode"], 4);
  // The newest start step of each (a step is completed as its end is heard).
  ASSERT_TRUE(wait_until(
      [&] {
        json last_ns, last_q;
        for (const json& st : parse_json(file("steps.json"))) {
          if (st.value("kind", "") != "start") continue;
          if (st.value("bgId", "") == "ns") last_ns = st;
          if (st.value("bgId", "") == q) last_q = st;
        }
        return last_ns.is_object() && last_ns["exitCode"] == 3 && last_q.is_object() && last_q["exitCode"] == 4;
      },
      10s))
      << file("steps.json");
}

TEST_P(QueueTest, AQueuedCommandRemovedBeforeItRanHasItsStepClosed) {
  const std::string a = blocker("a"), b = blocker("b");
  ASSERT_FALSE(a.empty() || b.empty());
  const std::string q = start(R"({"cmd": "true", "queue": true})");
  ASSERT_FALSE(q.empty());
  ASSERT_EQ(rmdir_errno(p("procs/" + q)), 0);
  // Not left "while the command runs" for a week: a start that never ran.
  ASSERT_TRUE(wait_until(
      [&] {
        for (const json& st : parse_json(file("steps.json")))
          if (st.value("kind", "") == "start" && st.value("bgId", "") == q) return st["ok"] == false;
        return false;
      },
      10s))
      << file("steps.json");
  for (const json& st : parse_json(file("steps.json")))
    if (st.value("kind", "") == "start" && st.value("bgId", "") == q) {
      EXPECT_EQ(st["ok"], false) << st.dump();
      EXPECT_EQ(st["error"]["code"], "ECANCELED") << st.dump();
    }
  release("a");
  release("b");
}

TEST_P(QueueTest, AStoppedQueuedCommandsEventsTakeEveryCursorUpToItsEnd) {
  const std::string a = blocker("a"), b = blocker("b");
  ASSERT_FALSE(a.empty() || b.empty());
  const std::string q = start(R"({"cmd": "true", "queue": true})");
  ASSERT_FALSE(q.empty());
  EXPECT_EQ(stop(q)["endReason"], "stopped");
  const std::string all = file("procs/" + q + "/events");
  const json terminal = parse_json(all);
  ASSERT_EQ(terminal["type"], "terminal") << all;
  const std::string end = terminal["cursor"];
  const std::string run = end.substr(0, end.find('-'));
  // A position before the end gives the end; the end, nothing; past it, EINVAL.
  for (const char* pos : {"0", "1"}) EXPECT_EQ(file("procs/" + q + "/events,since=" + run + "-" + pos), all) << pos;
  EXPECT_EQ(read_file(p("procs/" + q + "/events,since=" + end)).data, "");
  const std::string past = run + "-" + std::to_string(std::stoull(end.substr(end.find('-') + 1)) + 1);
  EXPECT_EQ(read_file(p("procs/" + q + "/events,since=" + past)).err, EINVAL);
  EXPECT_NE(errors().back().value("error", "").find("no such event"), std::string::npos) << json(errors()).dump();
  release("a");
  release("b");
}

TEST_P(QueueTest, AReadersOwnConditionOnAQueuedCommandHoldsOnceItRuns) {
  const std::string a = blocker("go-a"), b = blocker("go-b");
  ASSERT_FALSE(a.empty() || b.empty());
  const std::string q = start(R"({"cmd": "echo GO; exec sleep 30", "queue": true})");
  ASSERT_FALSE(q.empty());
  ASSERT_EQ(status_json(q)["state"], "queued");
  // One condition in the name, one written on the open file: each this
  // reader's own, probed from the command's start.
  const pid_t named = spawn_bg("exec cat \"$MNT/procs/" + q + "/ready,readyLog=^GO,timeoutSec=20\" > " + dir_ + "/named.out");
  const pid_t written = spawn_bg("exec 3<>\"$MNT/procs/" + q + "/ready,timeoutSec=20\"; echo 'log ^GO' >&3; exec cat <&3 > " +
                                 dir_ + "/written.out");
  // Both in their read (not the open or the write): the conditions are
  // taken while the command is queued.
  const auto reading = [](pid_t pid) {
    const std::string call = read_file("/proc/" + std::to_string(pid) + "/syscall").data;
    return blocked_in_fuse(pid) && call.starts_with(std::to_string(SYS_read) + " ");
  };
  ASSERT_TRUE(wait_until([&] { return reading(named) && reading(written); }, 10s));
  ASSERT_EQ(status_json(q)["state"], "queued");
  release("go-a");
  EXPECT_EQ(wait_bg(named, 15s), 0);
  EXPECT_EQ(wait_bg(written, 15s), 0);
  for (const char* out : {"/named.out", "/written.out"}) {
    const json r = parse_json(read_file(dir_ + out).data);
    EXPECT_EQ(r["ready"], true) << out << ": " << r.dump();
    EXPECT_EQ(r["stillRunning"], true) << r.dump();
    EXPECT_EQ(r["matched"]["text"], "GO") << r.dump();
  }
  stop(q);
  release("go-b");
}

TEST_P(QueueTest, AQueuedCommandsInputIsRefusedUntilItRuns) {
  const std::string a = blocker("go-a"), b = blocker("go-b");
  ASSERT_FALSE(a.empty() || b.empty());
  const std::string q = start(R"({"argv": ["cat"], "stdin": "pipe", "queue": true})");
  ASSERT_FALSE(q.empty());
  ASSERT_EQ(status_json(q)["state"], "queued");
  // An end of input taken now would be lost (no pipe yet): refused, as a signal is.
  EXPECT_EQ(write_file(p("procs/" + q + "/stdin,eof"), ""), ESRCH);
  EXPECT_EQ(write_file(p("procs/" + q + "/stdin"), "early\n"), ESRCH);
  EXPECT_NE(errors().back().value("error", "").find("queued"), std::string::npos) << json(errors()).dump();
  // Nor steps: they are of a run.
  EXPECT_EQ(write_file(p("procs/" + q + "/steps"), "start build\n"), ESRCH);
  EXPECT_EQ(file("procs/" + q + "/steps.json"), "[]\n");
  release("go-a");
  ASSERT_TRUE(wait_until([&] { return status_json(q)["running"] == true; }, 10s));
  EXPECT_EQ(write_file(p("procs/" + q + "/stdin"), "late\n"), 0);
  EXPECT_EQ(write_file(p("procs/" + q + "/stdin,eof"), ""), 0);
  const json w = wait_json(q, 10);
  EXPECT_EQ(w["proc"]["exitCode"], 0) << w.dump();
  EXPECT_EQ(file("procs/" + q + "/log"), "late\n");
  release("go-b");
}

INSTANTIATE_TEST_SUITE_P(Tracking, QueueTest, ::testing::Values("", "off"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param).empty() ? std::string("cgroup") : std::string("proctree");
                         });

}  // namespace
}  // namespace sbxit
