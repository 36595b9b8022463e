// Shell text that is one simple command (`sleep 30`) runs as one process,
// with the environment dash would have given it; anything else, and any
// such command that cannot be executed, is the shell's as before.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <fstream>
#include <sstream>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using SimpleCommandTest = SbxfsTest;

std::string proc_file(pid_t pid, const char* name) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/" + name);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Its children, from /proc/PID/task/PID/children.
std::string children(pid_t pid) {
  return proc_file(pid, ("task/" + std::to_string(pid) + "/children").c_str());
}

TEST_F(SimpleCommandTest, SleepAsTextIsOneProcessThatAStopEnds) {
  const std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const json st = status_json(id);
  EXPECT_EQ(st["argv"], json({"/bin/sh", "-c", "sleep 30"})) << "the record says what was asked";
  const pid_t pid = st["pid"].get<pid_t>();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(proc_file(pid, "comm"), "sleep\n") << "the record's process is the command, no shell above it";
  std::string cmdline = proc_file(pid, "cmdline");
  std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
  EXPECT_EQ(cmdline, "sleep 30 ");
  EXPECT_EQ(children(pid), "") << "no process below it";
  auto r = run("echo > \"$MNT/procs/" + id + "/stop\"");
  ASSERT_EQ(r.code, 0) << r.err;
  const json w = wait_json(id);
  EXPECT_EQ(w["proc"]["signal"], "SIGTERM") << w.dump();
  EXPECT_EQ(w["proc"]["endReason"], "stopped");
}

TEST_F(SimpleCommandTest, AProgramNotFoundFailsAsTheShellSaysSo) {
  const std::string id = start("no-such-program-here 1 2");
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id);
  EXPECT_EQ(w["proc"]["exitCode"], 127);
  EXPECT_NE(log(id).find("no-such-program-here: not found"), std::string::npos) << log(id);
}

// A file that is no program (no #!) is run by the shell as a script, as it
// always was for shell text; a JSON argv runs no shell (ENOEXEC).
TEST_F(SimpleCommandTest, AScriptWithoutInterpreterLineStillRunsInTheShell) {
  const std::string script = dir_ + "/plain-script";
  {
    std::ofstream f(script);
    f << "echo from the script $((1 + 2))\n";
  }
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  const std::string id = start(script);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "from the script 3\n");
}

TEST_F(SimpleCommandTest, BuiltInsAndShellSyntaxStayTheShells) {
  const std::string echo = start("echo -e a");  // dash's echo prints -e; /bin/echo would not
  const std::string two = start("sleep 0.01; sleep 30");
  ASSERT_FALSE(echo.empty());
  ASSERT_FALSE(two.empty());
  wait_json(echo);
  EXPECT_EQ(log(echo), "-e a\n");
  const pid_t pid = status_json(two)["pid"].get<pid_t>();
  EXPECT_EQ(proc_file(pid, "comm"), "sh\n");
  ASSERT_EQ(run("echo > \"$MNT/procs/" + two + "/stop\"").code, 0);
  wait_json(two);
}

// The command's environment, printed by env(1) run as a simple command and
// as the second of two commands (which dash runs from its own environment):
// the same, but for SBX_BGID. Run from a folder named through a symbolic
// link, with PWD given and not, and names dash does not take.
TEST_F(SimpleCommandTest, TheEnvironmentIsTheOneTheShellWouldGive) {
  ASSERT_EQ(::mkdir((dir_ + "/real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((dir_ + "/real").c_str(), (dir_ + "/link").c_str()), 0);
  const std::string link = dir_ + "/link";
  for (const json& env : {json{{"A-B", "1"}, {"x.y", "2"}, {"K", "v"}}, json{{"PWD", link}}, json{{"PWD", "/"}}}) {
    json simple = {{"cmd", "env"}, {"cwd", link}, {"env", env}};
    json shell = {{"cmd", ": ; env"}, {"cwd", link}, {"env", env}};
    const std::string a = start(simple.dump());
    const std::string b = start(shell.dump());
    ASSERT_FALSE(a.empty());
    ASSERT_FALSE(b.empty());
    wait_json(a);
    wait_json(b);
    auto lines = [&](const std::string& id) {
      std::vector<std::string> out;
      std::istringstream in(log(id));
      for (std::string l; std::getline(in, l);)
        if (l.rfind("SBX_BGID=", 0) != 0) out.push_back(l);
      std::sort(out.begin(), out.end());
      return out;
    };
    const std::vector<std::string> mine = lines(a);
    EXPECT_EQ(mine, lines(b)) << env.dump();
    EXPECT_FALSE(mine.empty());
  }
}

// A restart runs in the folder of the first run; dash decides at each run
// whether the given PWD still names it (here the link moved between runs).
TEST_F(SimpleCommandTest, EachRunDecidesItsPwdAsTheShellDoes) {
  ASSERT_EQ(::mkdir((dir_ + "/v1").c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((dir_ + "/v2").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((dir_ + "/v1").c_str(), (dir_ + "/cur").c_str()), 0);
  const std::string cur = dir_ + "/cur";
  char* real = ::realpath((dir_ + "/v1").c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  const std::string v1 = real;
  std::free(real);
  const json req = {{"cmd", "printenv PWD"}, {"cwd", cur}, {"env", {{"PWD", cur}}}, {"restart", "always"},
                    {"maxRestarts", 1}, {"restartDelaySec", 1}};
  const std::string id = start(req.dump());
  ASSERT_FALSE(id.empty());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (log(id).find(cur + "\n") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_NE(log(id).find(cur + "\n"), std::string::npos) << "the first run keeps the PWD that names its folder";
  ASSERT_EQ(::unlink(cur.c_str()), 0);
  ASSERT_EQ(::symlink((dir_ + "/v2").c_str(), cur.c_str()), 0);
  wait_json(id, 20);
  EXPECT_NE(log(id).find(v1 + "\n"), std::string::npos) << "the second run, still in v1, is told its real path:\n"
                                                          << log(id);
}

// An empty PATH entry is the working directory, and the program is named as
// dash and execvp name it: `show0`, not `./show0` (a script's $0).
TEST_F(SimpleCommandTest, AnEmptyPathEntryNamesTheProgramBare) {
  const std::string script = dir_ + "/show0";
  {
    std::ofstream f(script);
    f << "#!/bin/sh\necho \"$0\"\n";
  }
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  const json env = {{"PATH", ":/usr/bin:/bin"}};
  const std::string text = start(json({{"cmd", "show0"}, {"cwd", dir_}, {"env", env}}).dump());
  const std::string argv = start(json({{"argv", {"show0"}}, {"cwd", dir_}, {"env", env}}).dump());
  const std::string shell = start(json({{"cmd", ": ; show0"}, {"cwd", dir_}, {"env", env}}).dump());
  for (const std::string& id : {text, argv, shell}) {
    ASSERT_FALSE(id.empty());
    wait_json(id);
    EXPECT_EQ(log(id), "show0\n") << id;
  }
}

}  // namespace
}  // namespace sbxit
