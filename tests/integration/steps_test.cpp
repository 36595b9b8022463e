// sbx-step and procs/ID/steps.json: steps recorded from inside a command.
#include <fcntl.h>

#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using StepsTest = SbxfsTest;

const std::string kStep = SBX_STEP_PATH;

// The record is in the tree before the command's first instruction (the
// supervisor publishes it between fork and exec), so sbx-step and friends
// never miss it.
TEST_F(StepsTest, ACommandFindsItsOwnRecordAtOnce) {
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    ids.push_back(start(R"({"argv": ["/bin/sh", "-c", "test -e \"$SBX_MOUNT/procs/$SBX_BGID/steps\" && echo found || echo missing"]})"));
    ASSERT_FALSE(ids.back().empty());
  }
  for (const auto& id : ids) {
    wait_ended(id);
    EXPECT_EQ(log(id), "found\n") << id;
  }
}

// A step's name is the command's words, and the command knows its secrets:
// steps.json masks them, as every other file does (audit: it showed them).
TEST_F(StepsTest, SecretsInStepNamesAreMasked) {
  const std::string id = start(R"({"argv": ["/bin/sh", "-c", "\"$STEP\" \"step-$TOK\" -- true"], "env": {"STEP": ")" +
                               kStep + R"("}, "secretEnv": {"TOK": "TOPSECRET99"}})");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  const std::string text = file("procs/" + id + "/steps.json");
  const json steps = parse_json(text);
  ASSERT_TRUE(steps.is_array() && steps.size() == 1) << text;
  EXPECT_EQ(steps[0]["name"], "step-****") << text;
  EXPECT_EQ(text.find("TOPSECRET99"), std::string::npos) << text;
}

TEST_F(StepsTest, ShellScriptWithAFailingStep) {
  const std::string script = dir_ + "/build.sh";
  ASSERT_EQ(write_file(script,
                       "#!/bin/sh\n"
                       "set -u\n"
                       "\"$STEP\" fetch -- sh -c 'echo fetching; sleep 0.2'\n"
                       "\"$STEP\" start compile\n"
                       "echo compiling\n"
                       "\"$STEP\" end 0\n"
                       "\"$STEP\" test -- sh -c 'echo failing >&2; exit 3'\n"
                       "rc=$?\n"
                       "\"$STEP\" start report\n"
                       "touch \"$T/reporting\"\n"
                       "while [ ! -e \"$T/go\" ]; do sleep 0.05; done\n"
                       "exit $rc\n",
                       O_WRONLY | O_CREAT | O_TRUNC),
            0);
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  std::string id = start(R"({"argv": [")" + script + R"("], "env": {"STEP": ")" + kStep + R"(", "T": ")" + dir_ +
                         R"("}})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return stat_errno(dir_ + "/reporting") == 0; }, 10s));

  auto steps = parse_json(file("procs/" + id + "/steps.json"));
  ASSERT_TRUE(steps.is_array()) << steps;
  ASSERT_EQ(steps.size(), 4u) << steps.dump();
  EXPECT_EQ(steps[0]["name"], "fetch");
  EXPECT_EQ(steps[0]["exitCode"], 0);
  EXPECT_EQ(steps[0]["running"], false);
  EXPECT_GE(steps[0]["ms"].get<long>(), 150);
  EXPECT_TRUE(is_iso_time(steps[0]["startedAt"]));
  EXPECT_EQ(steps[1]["name"], "compile");
  EXPECT_EQ(steps[1]["exitCode"], 0);
  EXPECT_EQ(steps[2]["name"], "test");
  EXPECT_EQ(steps[2]["exitCode"], 3);
  EXPECT_EQ(steps[2]["running"], false);
  EXPECT_EQ(steps[3]["name"], "report");
  EXPECT_EQ(steps[3]["running"], true);
  EXPECT_TRUE(steps[3]["ms"].is_null());
  EXPECT_TRUE(steps[3]["exitCode"].is_null());

  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  auto w = wait_json(id);
  EXPECT_EQ(w["proc"]["exitCode"], 3) << "the script saw the failing step's status";
  steps = parse_json(file("procs/" + id + "/steps.json"));
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[3]["running"], false);
  EXPECT_EQ(steps[3]["unfinished"], true);
  EXPECT_EQ(log(id).find("fetching\ncompiling\nfailing\n"), 0u) << log(id);
}

// A restart policy's next run starts with no steps: the last run's are
// closed with it (not ended by the next run, not counted against it), also
// for a daemon that takes the record back; between runs a step is ESRCH.
TEST_F(StepsTest, EachRunOfARestartPolicyHasItsOwnSteps) {
  const std::string script = dir_ + "/runs.sh";
  ASSERT_EQ(write_file(script,
                       "s=\"$SBX_MOUNT/procs/$SBX_BGID\"\n"
                       "if [ -e \"$T/ran\" ]; then\n"
                       "  while ! grep -q '\"state\": \"running\"' \"$s/status.json\"; do sleep 0.02; done\n"
                       "  cat \"$s/steps.json\" > \"$T/seen\"; echo 'end 42' > \"$s/steps\" 2>/dev/null; echo \"end=$?\" >> \"$T/seen\"\n"
                       "  touch \"$T/second\"; exec sleep 30\n"
                       "fi\n"
                       "touch \"$T/ran\"; echo 'start first' > \"$s/steps\"; exit 1\n",
                       O_WRONLY | O_CREAT),
            0);
  const std::string id =
      start(R"({"argv": ["sh", ")" + script + R"("], "restart": "on-failure", "restartDelaySec": 2})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return status_json(id)["state"] == "restarting"; }, 10s));
  EXPECT_EQ(write_file(p("procs/" + id + "/steps"), "start late\n"), ESRCH) << "between runs";
  const json between = parse_json(file("procs/" + id + "/steps.json"));
  ASSERT_EQ(between.size(), 1u) << between.dump();
  EXPECT_EQ(between[0]["running"], false) << "its run is over";
  ASSERT_TRUE(wait_until([&] { return read_file(dir_ + "/second").err == 0; }, 10s));
  const std::string seen = read_file(dir_ + "/seen").data;
  EXPECT_EQ(parse_json(seen.substr(0, seen.find("end="))), json::array()) << seen;
  EXPECT_NE(seen.find("end=1"), std::string::npos) << "the next run has no step to end: " << seen;
  ASSERT_TRUE(restart_daemon());
  EXPECT_EQ(parse_json(file("procs/" + id + "/steps.json")), json::array()) << "taken back: still this run's";
}

// A restart's run may write its first step at its first instruction: the
// run is known (monitor.json) before it runs, however late the monitor's
// news of it reaches the daemon (held back here: its renames are slowed).
TEST_F(StepsTest, ARestartedRunsFirstInstructionMayWriteAStep) {
  const std::string script = dir_ + "/runs.sh";
  ASSERT_EQ(write_file(script,
                       "s=\"$SBX_MOUNT/procs/$SBX_BGID/steps\"\n"
                       "if [ -e \"$T/ran\" ]; then\n"
                       "  echo 'start second' > \"$s\"; echo \"rc=$?\" > \"$T/seen\"; exec sleep 30\n"
                       "fi\n"
                       "touch \"$T/ran\"; while [ ! -e \"$T/go\" ]; do sleep 0.02; done; exit 1\n",
                       O_WRONLY | O_CREAT),
            0);
  const std::string id =
      start(R"({"argv": ["sh", ")" + script + R"("], "restart": "on-failure", "restartDelaySec": 0.1})");
  ASSERT_FALSE(id.empty());
  const json mon = parse_json(read_file(state_ + "/procs/" + id + "/monitor.json").data);
  ASSERT_TRUE(mon.contains("monitorPid")) << mon.dump();
  std::string why;
  const pid_t tracer = trace(mon["monitorPid"].get<pid_t>(),
                             "-e trace=rename,renameat,renameat2 "
                             "-e inject=rename,renameat,renameat2:delay_enter=700000 -o /dev/null",
                             why);
  if (tracer < 0) GTEST_SKIP() << "strace cannot trace the monitor here: " << why;
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  ASSERT_TRUE(wait_until([&] { return read_file(dir_ + "/seen").err == 0; }, 20s));
  EXPECT_EQ(read_file(dir_ + "/seen").data, "rc=0\n") << "the step was refused";
  const json steps = parse_json(file("procs/" + id + "/steps.json"));
  ASSERT_EQ(steps.size(), 1u) << steps.dump();
  EXPECT_EQ(steps[0]["name"], "second");
}

// sbx-step NAME -- COMMAND ends its own step, also when COMMAND left a
// step of its own running.
TEST_F(StepsTest, AStepEndsItselfWhateverItsCommandLeftRunning) {
  const std::string id = start("\"" + kStep + "\" outer -- sh -c '\"" + kStep + "\" start inner; exit 5'; sleep 30");
  ASSERT_FALSE(id.empty());
  json steps;
  ASSERT_TRUE(wait_until([&] {
    steps = parse_json(file("procs/" + id + "/steps.json"));
    return steps.size() == 2 && steps[0]["running"] == false;
  }, 10s)) << steps.dump();
  EXPECT_EQ(steps[0]["name"], "outer");
  EXPECT_EQ(steps[0]["exitCode"], 5);
  EXPECT_EQ(steps[1]["name"], "inner");
  EXPECT_EQ(steps[1]["running"], true) << "left running by its command";
  // By name: no such step running is EINVAL.
  EXPECT_EQ(write_file(p("procs/" + id + "/steps"), "end 0 nobody\n"), EINVAL);
  EXPECT_EQ(write_file(p("procs/" + id + "/steps"), "end 0 inner\n"), 0);
  EXPECT_EQ(parse_json(file("procs/" + id + "/steps.json"))[1]["exitCode"], 0);
}

TEST_F(StepsTest, EnvironmentNamesTheTree) {
  std::string id = start("echo \"$SBX_BGID $SBX_MOUNT\"");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  EXPECT_EQ(log(id), id + " " + mnt_ + "\n");
}

TEST_F(StepsTest, OutsideSbxfsItJustRunsTheCommand) {
  auto r = run("env -u SBX_BGID -u SBX_MOUNT \"$STEP\" hello -- sh -c 'echo hi; exit 5'", 10, {{"STEP", kStep}});
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(r.out, "hi\n");
  r = run("env -u SBX_BGID -u SBX_MOUNT sh -c '\"$STEP\" start x && \"$STEP\" end 1 && echo ok'", 10,
          {{"STEP", kStep}});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "ok\n");
  EXPECT_EQ(run("\"$STEP\"", 10, {{"STEP", kStep}}).code, 2) << "usage";
}

TEST_F(StepsTest, BadLinesAreEinvalAndStepsSurviveARestart) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const std::string steps = p("procs/" + id + "/steps");
  EXPECT_EQ(write_file(steps, "bogus\n"), EINVAL);
  EXPECT_EQ(write_file(steps, "end\n"), EINVAL) << "no step is running";
  EXPECT_EQ(write_file(steps, "start one\nend 7\nstart two\n"), 0);
  ASSERT_TRUE(restart_daemon());
  auto j = parse_json(file("procs/" + id + "/steps.json"));
  ASSERT_EQ(j.size(), 2u) << j;
  EXPECT_EQ(j[0]["name"], "one");
  EXPECT_EQ(j[0]["exitCode"], 7);
  EXPECT_EQ(j[1]["name"], "two");
  EXPECT_EQ(j[1]["running"], true);
  EXPECT_EQ(write_file(steps, "end 0\n"), 0);
  EXPECT_EQ(parse_json(file("procs/" + id + "/steps.json"))[1]["exitCode"], 0);
  // Once the command has ended its steps are closed: ESRCH, as for signal.
  ASSERT_EQ(write_file(steps, "start three\n"), 0);
  ASSERT_EQ(write_file(p("procs/" + id + "/stop"), "\n"), 0);
  EXPECT_EQ(write_file(steps, "end 0\n"), ESRCH);
  EXPECT_EQ(write_file(steps, "start late\n"), ESRCH);
  EXPECT_NE(errors().back().value("error", "").find("has ended"), std::string::npos) << errors().back().dump();
  const json after = parse_json(file("procs/" + id + "/steps.json"));
  ASSERT_EQ(after.size(), 3u) << after;
  EXPECT_EQ(after[2]["unfinished"], true) << after;
  EXPECT_EQ(after[2]["exitCode"], nullptr) << after;
}

// A bad value never enters the store: a name that is not UTF-8 is refused,
// and the store (in memory and in the state directory) keeps working.
TEST_F(StepsTest, InvalidUtf8IsEinvalAndLaterStepsAreSaved) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const std::string steps = p("procs/" + id + "/steps");
  EXPECT_EQ(write_file(steps, "start \xff\n"), EINVAL);
  auto errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["path"], "procs/" + id + "/steps") << errs.back();
  EXPECT_EQ(errs.back()["errno"], "EINVAL") << errs.back();
  EXPECT_NE(errs.back()["error"].get<std::string>().find("UTF-8"), std::string::npos) << errs.back();
  // The lines before a bad one in the same write are kept, and saved.
  EXPECT_EQ(write_file(steps, "start first\nstart bad\xc3\n"), EINVAL);
  EXPECT_EQ(write_file(steps, "end 0\n"), 0);
  // A long name is cut at a character boundary, never inside one.
  const std::string long_name = std::string(199, 'x') + "\xc3\xa9" + "tail";
  EXPECT_EQ(write_file(steps, "start " + long_name + "\n"), 0);
  EXPECT_EQ(write_file(steps, "end 4\nstart last\n"), 0);
  ASSERT_TRUE(restart_daemon());
  auto j = parse_json(file("procs/" + id + "/steps.json"));
  ASSERT_TRUE(j.is_array()) << j;
  ASSERT_EQ(j.size(), 3u) << j;
  EXPECT_EQ(j[0]["name"], "first");
  EXPECT_EQ(j[0]["exitCode"], 0);
  EXPECT_EQ(j[1]["name"], std::string(199, 'x'));
  EXPECT_EQ(j[1]["exitCode"], 4);
  EXPECT_EQ(j[2]["name"], "last");
  EXPECT_EQ(j[2]["running"], true);
}

}  // namespace
}  // namespace sbxit
