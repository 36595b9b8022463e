// Sharing one box: whose work is it (SBX_CLIENT, `client`, `mine`), fair
// shares between users (-o max_running_per_user), and the box's steps,
// kept in the state directory (steps.json, root status.json `steps`).
#include <signal.h>
#include <sys/stat.h>

#include <ctime>
#include <optional>
#include <sstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

/// Stops procs/ID (the write returns once the tree is gone); 0 or the errno.
int stop_command(const std::string& mnt, const std::string& id) { return write_file(mnt + "/procs/" + id + "/stop", "\n"); }

class SharingTest : public SbxfsTest {
 protected:
  /// Starts `command` as client `client` (its own session, like an agent's
  /// harness): the writer's environment holds SBX_CLIENT when it is not empty.
  std::string start_as(const std::string& client, const std::string& command) {
    const std::string env = client.empty() ? "env -u SBX_CLIENT" : "env SBX_CLIENT='" + client + "'";
    RunResult r = run("setsid -w " + env + " sh -c 'exec 3<>\"$MNT/cmd\"; echo \"$C\" >&3; read -r id <&3; echo \"$id\"'",
                      20, {{"C", command}});
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
  /// In a session of its own, starts `sleep 30` under `starter_env` and
  /// reads its status.json from the same session under `reader_env`.
  std::pair<std::string, json> start_then_read(const std::string& starter_env, const std::string& reader_env) {
    RunResult r = run("setsid -w " + starter_env + " sh -c '"
                      "exec 3<>\"$MNT/cmd\"; echo \"sleep 30\" >&3; read -r id <&3; exec 3>&-; echo \"$id\"; " +
                      reader_env + " cat \"$MNT/procs/$id/status.json\"'");
    EXPECT_EQ(r.code, 0) << r.err;
    json j = parse_json(r.out.substr(r.out.find('\n') + 1));
    EXPECT_TRUE(j.is_object()) << r.out;
    return {r.out.substr(0, r.out.find('\n')), j};
  }
  /// procs/ID/status.json read by `cat` in a session of its own as `client`.
  json status_as(const std::string& client, const std::string& id) {
    const std::string env = client.empty() ? "env -u SBX_CLIENT" : "env SBX_CLIENT='" + client + "'";
    RunResult r = run("setsid -w " + env + " cat \"$MNT/procs/$ID/status.json\"", 10, {{"ID", id}});
    EXPECT_EQ(r.code, 0) << r.err;
    return parse_json(r.out);
  }
};

TEST_F(SharingTest, ClientsUnderOneUidTellTheirCommandsApart) {
  const std::string a = start_as("agent-a", "sleep 30");
  const std::string b = start_as("agent-b", "sleep 30");
  ASSERT_TRUE(is_auto_id(a) && is_auto_id(b)) << a << " " << b;
  EXPECT_EQ(status_json(a)["client"], "agent-a");
  EXPECT_EQ(status_json(b)["client"], "agent-b");

  // cat, in sessions of their own: the client decides, both ways.
  EXPECT_EQ(status_as("agent-a", a)["mine"], true);
  EXPECT_EQ(status_as("agent-a", b)["mine"], false);
  EXPECT_EQ(status_as("agent-b", a)["mine"], false);
  EXPECT_EQ(status_as("agent-b", b)["mine"], true);

  // Python plain file I/O, on the root list and on wait.
  RunResult py = python(
      "import json, os\n"
      "m = os.environ['MNT']\n"
      "with open(m + '/status.json') as f: s = json.load(f)\n"
      "print(' '.join(p['bgId'] + '=' + str(p['mine']) + ':' + str(p['client']) for p in s['procs']))\n",
      10, {{"SBX_CLIENT", "agent-b"}});
  ASSERT_EQ(py.code, 0) << py.err;
  EXPECT_NE(py.out.find(a + "=False:agent-a"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find(b + "=True:agent-b"), std::string::npos) << py.out;

  // wait answers `mine` by the same rule.
  ASSERT_EQ(stop_command(mnt_, a), 0);
  RunResult w = run("env SBX_CLIENT=agent-a cat \"$MNT/procs/" + a + "/wait\"");
  json wj = parse_json(w.out);
  ASSERT_TRUE(wj.is_object()) << w.out << w.err;
  EXPECT_EQ(wj["proc"]["mine"], true);
  EXPECT_EQ(wj["proc"]["client"], "agent-a");
}

TEST_F(SharingTest, WithoutAClientTheSessionRuleHolds) {
  // A record without a client: the session decides, whatever the reader's client.
  auto [plain, same_session] = start_then_read("env -u SBX_CLIENT", "env SBX_CLIENT=someone");
  EXPECT_EQ(same_session["client"], nullptr);
  EXPECT_EQ(same_session["mine"], true) << "same session, and the record names no client";
  EXPECT_EQ(status_as("someone", plain)["mine"], false) << "another session";

  // A reader without a client, on a record with one: the session again.
  auto [named, j] = start_then_read("env SBX_CLIENT=agent-c", "env -u SBX_CLIENT");
  EXPECT_EQ(j["mine"], true);
  EXPECT_EQ(status_as("", named)["mine"], false) << "another session, no client";
}

TEST_F(SharingTest, ClientNamesAreLabelsNotBytes) {
  // Not UTF-8: no client. Over 256 bytes: cut at a character.
  const std::string long_name(300, 'x');
  const std::string id = start_as(long_name, "sleep 30");
  ASSERT_TRUE(is_auto_id(id));
  EXPECT_EQ(status_json(id)["client"], std::string(256, 'x'));
  RunResult r = run("setsid -w env SBX_CLIENT=$(printf 'bad\\377') sh -c '"
                    "exec 3<>\"$MNT/cmd\"; echo true >&3; read -r id <&3; echo \"$id\"'");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(status_json(r.out.substr(0, r.out.find('\n')))["client"], nullptr);
}

class FairShareTest : public SbxfsTest {
 protected:
  FairShareTest() { daemon_options_ = {"-o", "allow_other,max_running=8"}; }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for setpriv";
    SbxfsTest::SetUp();
    ::chmod(dir_.c_str(), 0755);
  }
  /// Starts `command` as uid/gid `uid`; the bgId, or "error: ..." with bash's message.
  std::string start_as_user(int uid, const std::string& command) {
    RunResult r = run("cd / && exec setpriv --reuid " + std::to_string(uid) + " --regid " + std::to_string(uid) +
                          " --clear-groups bash -c 'exec 3<>\"$MNT/cmd\"; echo \"$C\" >&3 || exit 7; read -r id <&3; echo \"$id\"'",
                      20, {{"C", command}});
    if (r.code != 0) return "error: " + r.err;
    return r.out.substr(0, r.out.find('\n'));
  }
};

TEST_F(FairShareTest, OneUserBeyondTheirShareWaitsWhileOthersStart) {
  // max_running=8 under allow_other: a quarter each by default, 2.
  const std::string a1 = start_as_user(65534, "sleep 30");
  const std::string a2 = start_as_user(65534, "sleep 30");
  ASSERT_TRUE(is_auto_id(a1) && is_auto_id(a2)) << a1 << " " << a2;
  const std::string a3 = start_as_user(65534, "sleep 30");
  EXPECT_NE(a3.find("Resource temporarily unavailable"), std::string::npos) << a3;
  bool logged = false;
  for (const json& e : errors())
    if (e.dump().find("max_running_per_user=2") != std::string::npos) logged = true;
  EXPECT_TRUE(logged) << "an errors line names the limit";

  // Another unprivileged user, and root, still start.
  const std::string b1 = start_as_user(65533, "sleep 30");
  EXPECT_TRUE(is_auto_id(b1)) << b1;
  EXPECT_TRUE(is_auto_id(start("sleep 30")));

  // Once one of the first user's commands has ended, they may start again.
  ASSERT_EQ(stop_command(mnt_, a1), 0);
  EXPECT_TRUE(is_auto_id(start_as_user(65534, "sleep 30")));
}

class FairShareOptionTest : public FairShareTest {
 protected:
  FairShareOptionTest() { daemon_options_ = {"-o", "allow_other,max_running_per_user=1"}; }
};

TEST_F(FairShareOptionTest, TheShareIsAnOption) {
  ASSERT_TRUE(is_auto_id(start_as_user(65534, "sleep 30")));
  EXPECT_NE(start_as_user(65534, "sleep 30").find("Resource temporarily unavailable"), std::string::npos);
  EXPECT_TRUE(is_auto_id(start_as_user(65533, "sleep 30")));
}

/// The step of steps.json (the last one) about `id` of `kind`.
TEST_F(SharingTest, StepsCarryTheSeedsFieldsAndSurviveARestart) {
  // A start that waits for a go file, so it ends while we look.
  const std::string id = start_as("agent-s", "while [ ! -e \"$T/go\" ]; do sleep 0.02; done; exit 3");
  ASSERT_TRUE(is_auto_id(id));
  json s = step_of(parse_json(file("steps.json")), id, "start");
  ASSERT_TRUE(s.is_object()) << file("steps.json");
  EXPECT_EQ(s["ok"], true);
  EXPECT_EQ(s["client"], "agent-s");
  EXPECT_EQ(s["ms"], nullptr) << "running: not over yet";
  EXPECT_TRUE(is_iso_time(s["at"]));

  // kill -9, restart: the steps are still there; the end, while the new
  // daemon runs, completes the start step.
  ASSERT_TRUE(restart_daemon());
  EXPECT_TRUE(step_of(parse_json(file("steps.json")), id, "start").is_object());
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  wait_json(id);
  ASSERT_TRUE(wait_until([&] { return step_of(parse_json(file("steps.json")), id, "start")["exitCode"] == 3; }, 10s));
  s = step_of(parse_json(file("steps.json")), id, "start");
  EXPECT_EQ(s["ok"], false) << "it exited with 3";
  EXPECT_TRUE(s["ms"].is_number() && s["ms"].get<double>() > 0) << s.dump();
  EXPECT_EQ(s["timedOut"], false);
  // The root report shows the same step among its last 30.
  EXPECT_EQ(step_of(root_status()["steps"], id, "start")["exitCode"], 3);

  // A refused request is a step too, with its error.
  EXPECT_NE(write_file(p("cmd"), "{\"cmd\": \"true\", \"bogus\": 1}\n"), 0);
  json refused;
  for (const json& st : parse_json(file("steps.json")))
    if (st["ok"] == false && st["error"].is_object()) refused = st;
  ASSERT_TRUE(refused.is_object()) << file("steps.json");
  EXPECT_EQ(refused["kind"], "start");
  EXPECT_EQ(refused["error"]["code"], "EINVAL");

  // A stop is done when the tree is gone: its ms, ok.
  const std::string longer = start("sleep 30");
  ASSERT_EQ(stop_command(mnt_, longer), 0);
  ASSERT_TRUE(wait_until([&] { return step_of(parse_json(file("steps.json")), longer, "stop")["ms"].is_number(); }, 10s));
  json stop = step_of(parse_json(file("steps.json")), longer, "stop");
  EXPECT_EQ(stop["ok"], true);
  EXPECT_EQ(stop["signal"], "SIGTERM");
}

// A command that ends at its TERM at once (a lone `sleep`, one process) is
// often over before the stop's write looks at it again: every such stop is
// still a step, completed with its signal.
TEST_F(SharingTest, EveryStopOfACommandThatEndsAtOnceIsAStep) {
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(start("sleep 30"));
  for (const std::string& id : ids) {
    ASSERT_TRUE(is_auto_id(id));
    ASSERT_EQ(stop_command(mnt_, id), 0);
  }
  for (const std::string& id : ids) {
    ASSERT_TRUE(wait_until([&] { return step_of(parse_json(file("steps.json")), id, "stop")["ms"].is_number(); }, 10s))
        << id << ": " << file("steps.json");
    EXPECT_EQ(step_of(parse_json(file("steps.json")), id, "stop")["signal"], "SIGTERM") << id;
  }
}

TEST_F(SharingTest, AStartThatEndedWhileNoDaemonRanIsCompletedByTheNext) {
  const std::string id = start("while [ ! -e \"$T/go2\" ]; do sleep 0.02; done; exit 4");
  ASSERT_TRUE(is_auto_id(id));
  kill_daemon(SIGKILL);
  ASSERT_EQ(write_file(dir_ + "/go2", "", O_WRONLY | O_CREAT), 0);
  // The monitor records the end in the state directory while no daemon runs.
  ASSERT_TRUE(wait_until([&] { return stat_errno(state_ + "/procs/" + id + "/exit.json") == 0; }, 10s));
  ASSERT_TRUE(start_daemon());
  json s = step_of(parse_json(file("steps.json")), id, "start");
  EXPECT_EQ(s["exitCode"], 4) << s.dump();
  EXPECT_EQ(s["ok"], false);
  EXPECT_TRUE(s["ms"].is_number()) << s.dump();
}

// A start's step is on disk before its command may run: a daemon killed
// between the two leaves a step and no command (completed with ECANCELED
// by the next daemon), never a command that ran without a step. The
// daemon is held just after the step's write (strace delays its return).
TEST_F(SharingTest, AStartsStepIsWrittenBeforeItsCommandRuns) {
  ASSERT_TRUE(is_auto_id(start("true")));  // today's file of steps exists
  char day[16];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::strftime(day, sizeof day, "%Y-%m-%d", &utc);
  const std::string steps_file = state_ + "/steps/" + day + ".jsonl";
  ASSERT_EQ(stat_errno(steps_file), 0);
  std::string why;
  const pid_t tracer =
      trace_daemon("-P '" + steps_file + "' -e trace=write -e inject=write:delay_exit=3000000 -o /dev/null", why);
  if (tracer < 0) GTEST_SKIP() << "strace cannot trace the daemon here: " << why;
  const pid_t writer = spawn_bg("echo 'touch \"$T/ran\"' > \"$MNT/cmd\"");
  ASSERT_GT(writer, 0);
  // The step's line is written; its write(2) has not returned yet.
  std::string bg_id;
  ASSERT_TRUE(wait_until([&] {
    std::istringstream in(read_file(steps_file).data);
    for (std::string line; std::getline(in, line);) {
      const json j = parse_json(line);
      if (j.is_object() && j.value("summary", "") == "touch \"$T/ran\"") bg_id = j.value("bgId", "");
    }
    return !bg_id.empty();
  }, 10s)) << read_file(steps_file).data;
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ::kill(tracer, SIGKILL);
  wait_bg(tracer, 5s);
  EXPECT_TRUE(wait_bg(writer, 10s).has_value());
  ASSERT_TRUE(start_daemon()) << daemon_log();
  json st = step_of(parse_json(file("steps.json")), bg_id, "start");
  EXPECT_EQ(st["ok"], false) << st.dump();
  EXPECT_EQ(st["error"]["code"], "ECANCELED") << st.dump();
  EXPECT_EQ(stat_errno(dir_ + "/ran"), ENOENT) << "the command ran after all";
  EXPECT_EQ(stat_errno(p("procs/" + bg_id)), ENOENT) << "a record of a command that never ran";
  EXPECT_NE(start("true"), bg_id) << "the id its step names is given again";
}

// A request refused on a named slot's cmd names the slot in its step (it
// had no bgId, so steps could not say which record was meant; audit).
TEST_F(SharingTest, ARefusedRequestToASlotNamesTheSlot) {
  ASSERT_EQ(start(R"({"cmd": "sleep 30", "name": "busy"})"), "busy");
  RunResult r = run("echo true > \"$MNT/procs/busy/cmd\"; echo \"rc=$?\"");
  EXPECT_NE(r.out.find("rc=1"), std::string::npos) << r.out << r.err;
  const json steps = parse_json(file("steps.json"));
  ASSERT_TRUE(steps.is_array() && !steps.empty()) << steps.dump();
  const json& last = steps.back();
  EXPECT_EQ(last["kind"], "start") << last.dump();
  EXPECT_EQ(last["ok"], false) << last.dump();
  EXPECT_EQ(last["error"]["code"], "EBUSY") << last.dump();
  EXPECT_EQ(last["bgId"], "busy") << last.dump();
}

// Refused requests cost their writer nothing, and each is a step kept a
// week: a user's are kept up to a budget (a burst, then one a second); the
// next one kept says how many before it were not.
TEST_F(SharingTest, RefusedRequestsPastAUsersBudgetAreCountedNotKept) {
  RunResult r = python(R"(
import os, time
t = time.monotonic()
for i in range(100):
    fd = os.open(os.environ['MNT'] + '/cmd', os.O_WRONLY)
    try: os.write(fd, b'{"bogus": %d}\n' % i)
    except OSError: pass
    os.close(fd)
print(int(time.monotonic() - t) + 1)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  auto refused = [&] {
    std::vector<json> v;
    for (const json& st : parse_json(file("steps.json")))
      if (st["ok"] == false && st["error"].is_object()) v.push_back(st);
    return v;
  };
  // The burst, and one more for each second the 100 writes took (a slow box).
  const std::size_t kept = refused().size();
  EXPECT_GE(kept, 60u);
  EXPECT_LE(kept, 60u + std::stoul(r.out)) << r.out;
  // One a second comes back: tried until one more is kept.
  ASSERT_TRUE(wait_until(
      [&] {
        (void)write_file(p("cmd"), "{\"bogus\": \"late\"}\n");
        return refused().size() > kept;
      },
      10s, 100ms));
  const std::string message = refused().back()["error"]["message"];
  const std::size_t at = message.find(" refused requests of this user before it were not kept");
  ASSERT_NE(at, std::string::npos) << message;
  const std::size_t open = message.rfind('(', at);
  ASSERT_NE(open, std::string::npos) << message;
  EXPECT_GE(std::stoul(message.substr(open + 1, at - open - 1)), 40u) << message;
}

// Two requests on one open cmd, the second refused: the first one's step
// stays as it is (and is completed by its end); the refusal is a step of
// its own.
TEST_F(SharingTest, ARefusedRequestAfterAStartOnTheSameFileLeavesTheStartsStep) {
  auto r = run("exec 3<>\"$MNT/cmd\"; echo 'exit 3' >&3; read -r id <&3; echo \"$id\"; "
               "echo '{\"cmd\": \"x\", \"bogus\": 1}' >&3; read -r answer <&3; echo \"$answer\"");
  const std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_TRUE(is_auto_id(id)) << r.out << r.err;
  wait_json(id);
  ASSERT_TRUE(wait_until([&] { return step_of(parse_json(file("steps.json")), id, "start")["exitCode"] == 3; }, 10s))
      << file("steps.json");
  const json s = step_of(parse_json(file("steps.json")), id, "start");
  EXPECT_EQ(s["error"], nullptr) << s.dump();
  int refused = 0;
  for (const json& st : parse_json(file("steps.json")))
    if (st["kind"] == "start" && st["error"].is_object() && st["error"]["code"] == "EINVAL") ++refused;
  EXPECT_EQ(refused, 1) << file("steps.json");
}

// An exec that fails after the record was published (an interpreter that
// is not there) is one start step, with the error the writer got.
TEST_F(SharingTest, AStartWhoseExecFailsIsOneStepWithItsError) {
  const std::string script = dir_ + "/bad.sh";
  ASSERT_EQ(write_file(script, "#!/nonexistent/interpreter\n", O_WRONLY | O_CREAT), 0);
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  EXPECT_EQ(write_file(p("cmd"), "{\"argv\": [\"" + script + "\"]}\n"), ENOENT);
  int seen = 0;
  json step;
  for (const json& s : parse_json(file("steps.json")))
    if (s["kind"] == "start" && s["summary"].get<std::string>().find("bad.sh") != std::string::npos) {
      ++seen;
      step = s;
    }
  EXPECT_EQ(seen, 1) << file("steps.json");
  EXPECT_EQ(step["ok"], false) << step.dump();
  EXPECT_EQ(step["error"]["code"], "ENOENT") << step.dump();
  EXPECT_EQ(step["ms"], nullptr) << step.dump();
  ASSERT_TRUE(is_auto_id(step["bgId"].get<std::string>())) << step.dump();
  // The id it names is not given again, also by the next daemon.
  ASSERT_TRUE(restart_daemon());
  EXPECT_NE(start("true"), step["bgId"].get<std::string>());
}

// status.json,fields=A+B: only those top-level fields, plus supervisor; the
// names that are none of them come back in unknownFields.
TEST_F(SharingTest, RootStatusFieldsPicksTheReportsParts) {
  ASSERT_TRUE(is_auto_id(start("sleep 30")));
  RunResult r = run("cat \"$MNT/status.json,fields=steps+disk+bogus+alsoBogus\"");
  ASSERT_EQ(r.code, 0) << r.err;
  json j = parse_json(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  std::vector<std::string> keys;
  for (auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"disk", "steps", "supervisor", "unknownFields"}));
  EXPECT_EQ(j["unknownFields"], json({"bogus", "alsoBogus"}));
  EXPECT_TRUE(j["steps"].is_array() && !j["steps"].empty());
  // Every known field alone, from Python, and with the list's own parameters.
  RunResult py = python(
      "import json, os\n"
      "m = os.environ['MNT']\n"
      "with open(m + '/status.json,fields=procs,tailBytes=10') as f: s = json.load(f)\n"
      "print(sorted(s), len(s['procs']), 'logTail' in s['procs'][0])\n");
  ASSERT_EQ(py.code, 0) << py.err;
  EXPECT_EQ(py.out, "['procs', 'supervisor'] 1 True\n");
  // A list without an item is a bad value.
  EXPECT_EQ(stat_errno(p("status.json,fields=")), EINVAL);
}

class StepsKeptBrieflyTest : public SharingTest {
 protected:
  StepsKeptBrieflyTest() { daemon_options_ = {"-o", "keep_steps_sec=3"}; }
};

TEST_F(StepsKeptBrieflyTest, OldStepsArePruned) {
  const std::string id = start("true");
  ASSERT_TRUE(is_auto_id(id));
  EXPECT_TRUE(step_of(parse_json(file("steps.json")), id, "start").is_object());
  EXPECT_TRUE(wait_until([&] { return !step_of(parse_json(file("steps.json")), id, "start").is_object(); }, 20s, 100ms))
      << "kept past keep_steps_sec: " << file("steps.json");
  // The README in the tree says how long (it said a week whatever the option; audit).
  const std::string readme = file("README");
  EXPECT_NE(readme.find("steps.json               what was done here (starts, stops, signals...),\n"
                        "                           kept 3 s:"),
            std::string::npos)
      << readme;
}

}  // namespace
}  // namespace sbxit
