// A start holds no FUSE thread: while monitors do not report (their fork
// server is SIGSTOPped, so every start waits for its monitor), every other
// file answers at once; the starts complete when it goes on, time out with
// ETIMEDOUT, or are called off by an interrupt, leaving nothing behind.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

/// The first three lines of `text`.
std::vector<std::string> three_lines(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out(3);
  for (std::string& line : out) std::getline(in, line);
  return out;
}

double seconds_to(const std::function<void()>& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class StartParkingTest : public SbxfsTest {
 protected:
  void TearDown() override {
    if (server_ > 0) ::kill(server_, SIGCONT);  // never leave it stopped
    SbxfsTest::TearDown();
  }

  /// The daemon's monitor fork server (`sbxfs-monitor --serve`, its child).
  pid_t monitor_server() {
    for (auto& task : list_dir("/proc/" + std::to_string(daemon_pid()) + "/task")) {
      std::string children = read_file("/proc/" + std::to_string(daemon_pid()) + "/task/" + task + "/children").data;
      std::istringstream in(children);
      for (pid_t pid; in >> pid;) {
        std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline").data;
        if (cmdline.find("--serve") != std::string::npos) return pid;
      }
    }
    return 0;
  }
  void stop_server() {
    ASSERT_TRUE(wait_until([&] { return (server_ = monitor_server()) > 0; }, 5s)) << "no monitor server found";
    ASSERT_EQ(::kill(server_, SIGSTOP), 0);
  }
  void cont_server() { ASSERT_EQ(::kill(server_, SIGCONT), 0); }

  /// Starts waiting for their monitor: their staging folders in the state directory.
  int starts_under_way() {
    int n = 0;
    for (auto& e : list_dir(state_ + "/staging"))
      if (e.rfind("new-", 0) == 0) ++n;
    return n;
  }

  /// After the server went on: a start queued behind the given-up ones has
  /// exec'd and ended, so they have been handled (the server takes jobs in order).
  void drain_server() {
    const std::string id = start("true");
    ASSERT_FALSE(id.empty());
    EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  }

  pid_t server_ = 0;
};

TEST_F(StartParkingTest, TwentyStuckStartsLeaveTheMountFastAndAllCompleteLater) {
  // Twenty files: the kernel lets one write at a time reach one file, so
  // twenty writers of the root cmd would wait in the kernel, not in the daemon.
  for (int i = 0; i < 20; ++i) ASSERT_EQ(mkdir_errno(p("procs/s" + std::to_string(i))), 0);
  stop_server();
  ASSERT_EQ(mkdir_errno(dir_ + "/ids"), 0);
  std::vector<pid_t> writers;
  for (int i = 0; i < 20; ++i) {
    const std::string n = std::to_string(i);
    writers.push_back(spawn_bg("exec 3<>\"$MNT/procs/s" + n + "/cmd\" && echo 'echo started-" + n +
                               "' >&3 && read -r id <&3 && echo \"$id\" > \"$T/ids/" + n + "\""));
  }
  // 20 starts wait for their monitors: twice the daemon's FUSE threads.
  ASSERT_TRUE(wait_until([&] { return starts_under_way() == 20; }, 10s)) << starts_under_way() << " under way";

  double t = seconds_to([&] { EXPECT_EQ(stat_errno(p("cmd")), 0); });
  // Held behind the parked starts, these would wait as long as the server
  // is stopped; answered, they take milliseconds (room for a loaded machine).
  EXPECT_LT(t, 5.0) << "stat cmd took " << t << " s";
  t = seconds_to([&] { EXPECT_TRUE(parse_json(read_file(p("status.json")).data).is_object()); });
  EXPECT_LT(t, 5.0) << "status.json took " << t << " s";
  t = seconds_to([&] {
    auto r = run("cat \"$MNT/README\" > /dev/null && ls \"$MNT/procs\" > /dev/null && cat \"$MNT/errors\" > /dev/null", 10);
    EXPECT_EQ(r.code, 0) << r.err;
  });
  EXPECT_LT(t, 5.0) << "README, ls procs and errors took " << t << " s";
  // Nothing of a start is there before its monitor forked the command: the slots are still empty.
  EXPECT_EQ(status_json("s0")["state"], "empty");
  for (pid_t w : writers) EXPECT_FALSE(wait_bg(w, 0ms)) << "a writer returned while its monitor was stopped";

  cont_server();
  std::set<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(wait_bg(writers[i], 20s), 0) << "writer " << i;
    std::string id = read_file(dir_ + "/ids/" + std::to_string(i)).data;
    ASSERT_FALSE(id.empty()) << "writer " << i;
    id.pop_back();
    EXPECT_EQ(id, "s" + std::to_string(i));
    ids.insert(id);
    EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0) << id;
    EXPECT_EQ(log(id), "started-" + std::to_string(i) + "\n") << id;
  }
  EXPECT_EQ(ids.size(), 20u);
  EXPECT_EQ(procs().size(), 20u);
  EXPECT_EQ(starts_under_way(), 0);
}

class StartTimeoutTest : public StartParkingTest {
 protected:
  StartTimeoutTest() { daemon_options_ = {"-o", "start_timeout=1"}; }
};

TEST_F(StartTimeoutTest, AStartWhoseMonitorNeverReportsFailsWithEtimedoutAndLeavesNothing) {
  stop_server();
  RunResult r;
  double t = seconds_to([&] { r = bash("echo 'touch \"$T/ran\"' > \"$MNT/cmd\"", 20); });
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("write error: Connection timed out"), std::string::npos) << r.err;
  EXPECT_GE(t, 0.9);
  EXPECT_LT(t, 5.0);
  const std::vector<json> errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "ETIMEDOUT") << errs.back().dump();
  EXPECT_NE(errs.back()["error"].get<std::string>().find("nothing was started"), std::string::npos);
  EXPECT_TRUE(procs().empty());
  EXPECT_EQ(starts_under_way(), 0);

  // The server goes on and forks the given-up job's monitor: it finds no folder.
  cont_server();
  drain_server();
  EXPECT_NE(stat_errno(dir_ + "/ran"), 0) << "the timed-out command ran";
  EXPECT_EQ(procs().size(), 1u);
  EXPECT_EQ(starts_under_way(), 0);
}

TEST_F(StartParkingTest, CtrlCOfAStuckStartReturnsAtOnceAndNothingIsStarted) {
  stop_server();
  const pid_t writer = spawn_bg("echo 'touch \"$T/ran\"' > \"$MNT/cmd\"");
  ASSERT_TRUE(wait_until([&] { return starts_under_way() == 1; }, 10s));
  ASSERT_EQ(::kill(writer, SIGINT), 0);
  // Killed by the signal at once, not held in the kernel until the monitor reports.
  EXPECT_EQ(wait_bg(writer, 3s), 128 + SIGINT);
  ASSERT_TRUE(wait_until([&] { return starts_under_way() == 0; }, 5s));
  const std::vector<json> errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "EINTR") << errs.back().dump();
  EXPECT_TRUE(procs().empty());

  cont_server();
  drain_server();
  EXPECT_NE(stat_errno(dir_ + "/ran"), 0) << "the interrupted command ran";
  EXPECT_EQ(procs().size(), 1u);
}

TEST_F(StartParkingTest, TheRestOfASplitWriteThatASignalCalledOffIsNoRequest) {
  stop_server();
  // A request over 1 MiB reaches the daemon in two pieces; the second one's
  // start hangs and a signal calls it off: write(2) returns the first
  // piece's count. The rest, written again, would run as shell text that
  // touches the flag: it is refused (ECANCELED), and nothing runs.
  RunResult r = python(
      "import os, json, signal, errno\n"
      "signal.signal(signal.SIGALRM, lambda *a: None)\n"
      "flag = os.environ['T'] + '/ran'\n"
      "data = json.dumps({'cmd': 'echo ' + 'x' * 1200000, 'note': '; touch ' + flag + ' #'}).encode()\n"
      "fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)\n"
      "signal.setitimer(signal.ITIMER_REAL, 0.3)\n"
      "n = os.write(fd, data)\n"
      "print('short count:', 0 < n < len(data))\n"
      "try:\n"
      "    os.write(fd, data[n:])\n"
      "    print('rest: written')\n"
      "except OSError as e:\n"
      "    print('rest:', errno.errorcode[e.errno])\n"
      "os.close(fd)\n",
      20);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "short count: True\nrest: ECANCELED\n");
  const std::vector<json> errs = errors();
  ASSERT_GE(errs.size(), 2u);
  EXPECT_EQ(errs[errs.size() - 2]["errno"], "EINTR") << errs[errs.size() - 2].dump();
  EXPECT_EQ(errs.back()["errno"], "ECANCELED") << errs.back().dump();
  cont_server();
  drain_server();
  EXPECT_NE(stat_errno(dir_ + "/ran"), 0) << "the rest of the called-off request ran";
  EXPECT_EQ(procs().size(), 1u) << "only drain_server's";
}

TEST_F(StartParkingTest, AWriteThatPythonRetriesAfterASignalStartsTheCommandOnce) {
  stop_server();
  // A handler that does not raise: Python writes the same bytes again after
  // the EINTR (PEP 475). That second write starts the command, once; it is
  // no repeat of a refused request, whose answer would be EINTR forever.
  ASSERT_EQ(write_file(dir_ + "/w.py",
                       "import os, signal\n"
                       "signal.signal(signal.SIGALRM, lambda *a: None)\n"
                       "fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)\n"
                       "signal.setitimer(signal.ITIMER_REAL, 0.3)\n"
                       "os.write(fd, b'echo again\\n')\n"
                       "print(os.read(fd, 100).decode().strip())\n",
                       O_WRONLY | O_CREAT | O_TRUNC),
            0);
  const pid_t writer = spawn_bg(python_path() + " \"$T/w.py\"", dir_ + "/w.out");
  ASSERT_TRUE(wait_until([&] {
    const std::vector<json> errs = errors();
    return !errs.empty() && errs.back()["errno"] == "EINTR";
  }, 10s));
  cont_server();
  ASSERT_EQ(wait_bg(writer, 20s), 0) << read_file(dir_ + "/w.out").data;
  std::string id = read_file(dir_ + "/w.out").data;
  ASSERT_FALSE(id.empty());
  id.pop_back();
  ASSERT_TRUE(is_auto_id(id)) << id;
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "again\n");
  EXPECT_EQ(procs(), std::vector<std::string>{id});
}

TEST_F(StartParkingTest, AHandledSignalFailsTheWriteWithEintrAndARetryStartsAnew) {
  stop_server();
  // Python retries a write that a signal interrupted unless the handler
  // raises: the first write fails, the second (after SIGCONT) starts.
  RunResult r = python(
      "import os, signal, sys\n"
      "class Alarm(Exception): pass\n"
      "def on_alarm(*a): raise Alarm()\n"
      "signal.signal(signal.SIGALRM, on_alarm)\n"
      "fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)\n"
      "signal.setitimer(signal.ITIMER_REAL, 0.3)\n"
      "try:\n"
      "    os.write(fd, b'echo first\\n')\n"
      "    print('written')\n"
      "except Alarm:\n"
      "    print('interrupted')\n"
      "print(os.read(fd, 200).decode().strip())\n"
      "os.kill(int(os.environ['SERVER']), signal.SIGCONT)\n"
      "os.write(fd, b'echo second\\n')\n"
      "print(os.pread(fd, 200, 0).decode().strip())\n",
      20, {{"SERVER", std::to_string(server_)}});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> lines = three_lines(r.out);
  const std::string &line1 = lines[0], &line2 = lines[1], &id = lines[2];
  EXPECT_EQ(line1, "interrupted");
  EXPECT_EQ(line2.rfind("error: EINTR: ", 0), 0u) << line2;
  ASSERT_TRUE(is_auto_id(id)) << r.out;
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "second\n");
  EXPECT_EQ(procs(), std::vector<std::string>{id});
}

// While a write waits for its start, the kernel lets nothing else of that
// file through (it locks the file for the write); a start completed at
// close (flush) holds no such lock, so other threads' writes and reads of
// the same open file reach the daemon meanwhile: EBUSY.
TEST_F(StartParkingTest, AWriteOrReadDuringAStartAtCloseIsEbusy) {
  stop_server();
  RunResult r = python(
      "import os, signal, threading, time\n"
      "fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)\n"
      "os.write(fd, b'echo one')\n"  // no newline: the request is complete at close
      "res = {}\n"
      "def closer():\n"
      "    try:\n"
      "        os.close(os.dup(fd))\n"
      "        res['close'] = 'ok'\n"
      "    except OSError as e:\n"
      "        res['close'] = os.strerror(e.errno)\n"
      "t = threading.Thread(target=closer)\n"
      "t.start()\n"
      "staging = os.environ['STATE'] + '/staging'\n"
      "deadline = time.monotonic() + 10\n"
      "while not any(n.startswith('new-') for n in os.listdir(staging)) and time.monotonic() < deadline:\n"
      "    time.sleep(0.01)\n"
      "for op in ('write', 'read'):\n"
      "    try:\n"
      "        os.write(fd, b'echo two\\n') if op == 'write' else os.read(fd, 100)\n"
      "        print(op, 'ok', flush=True)\n"
      "    except OSError as e:\n"
      "        print(op, os.strerror(e.errno), flush=True)\n"
      "os.kill(int(os.environ['SERVER']), signal.SIGCONT)\n"
      "t.join()\n"
      "print(res['close'], os.pread(fd, 100, 0).decode().strip())\n",
      20, {{"SERVER", std::to_string(server_)}});
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const std::vector<std::string> lines = three_lines(r.out);
  const std::string &wr = lines[0], &rd = lines[1], &last = lines[2];
  EXPECT_EQ(wr, "write Device or resource busy");
  EXPECT_EQ(rd, "read Device or resource busy");
  ASSERT_EQ(last.rfind("ok ", 0), 0u) << r.out;
  const std::string id = last.substr(3);
  ASSERT_TRUE(is_auto_id(id)) << r.out;
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "one\n");
  EXPECT_EQ(procs(), std::vector<std::string>{id});
  const std::vector<json> errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "EBUSY");
}

// A start in flight when the daemon is killed made its cgroup but no
// record: the next daemon leaves nothing of it, in the state directory or
// in the cgroup tree.
TEST_F(StartParkingTest, AStartInFlightWhenTheDaemonIsKilledLeavesNoCgroup) {
  const json sup = root_status()["supervisor"];
  if (!sup["cgroup"].is_string() || sup["cgroup"].get<std::string>().empty()) GTEST_SKIP() << "no cgroup tracking here";
  const std::string subtree = sup["cgroup"];
  auto commands_cgroups = [&] {
    std::vector<std::string> out;
    for (const std::string& e : list_dir(subtree))
      if (e.rfind("cmd-", 0) == 0) out.push_back(e);
    return out;
  };
  stop_server();
  spawn_bg("echo 'sleep 100' > \"$MNT/cmd\"");
  ASSERT_TRUE(wait_until([&] { return starts_under_way() == 1 && commands_cgroups().size() == 1; }, 5s));
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(::kill(server_, SIGKILL), 0);
  server_ = 0;
  ASSERT_TRUE(start_daemon()) << daemon_log();
  EXPECT_EQ(commands_cgroups(), std::vector<std::string>{});
  EXPECT_EQ(procs(), std::vector<std::string>{});
  EXPECT_EQ(starts_under_way(), 0);
}

// A monitor server left stopped by a daemon that was killed runs none of
// its jobs when it is let go: the next daemon has the state directory, and
// a late monitor would work in a folder of its (planted here under the name
// the old start had: the monitor would remove its ctl and exit.json.tmp).
TEST_F(StartParkingTest, AServerOfAKilledDaemonRunsNoJobOnceLetGo) {
  stop_server();
  const pid_t old_server = server_;
  spawn_bg("echo 'echo late > \"$T/late\"' > \"$MNT/cmd\"");
  ASSERT_TRUE(wait_until([&] { return starts_under_way() == 1; }, 5s));
  std::string folder;
  for (const std::string& e : list_dir(state_ + "/staging"))
    if (e.rfind("new-", 0) == 0) folder = state_ + "/staging/" + e;
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  ASSERT_EQ(mkdir_errno(folder), 0);
  ASSERT_EQ(::mkfifo((folder + "/ctl").c_str(), 0600), 0);
  ASSERT_EQ(write_file(folder + "/exit.json.tmp", std::string(1024, ' '), O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(::kill(old_server, SIGCONT), 0);
  server_ = 0;
  EXPECT_TRUE(wait_until([&] { return !pid_alive(old_server); }, 5s)) << "the old server went on";
  const std::string id = start("true");  // the new daemon's own starts are unaffected
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_NE(stat_errno(dir_ + "/late"), 0) << "a job of the dead daemon ran";
  EXPECT_EQ(stat_errno(folder + "/ctl"), 0) << "a late monitor worked in the folder";
  EXPECT_EQ(stat_errno(folder + "/exit.json.tmp"), 0) << "a late monitor worked in the folder";
  EXPECT_EQ(procs(), std::vector<std::string>{id});
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);
}

// A folder published (renamed into procs/) whose command was never let go
// (the daemon died in between; its monitor removed monitor.json) is no
// record: it goes at the next load, and the record it was replacing,
// held aside in staging/, comes back.
TEST_F(StartParkingTest, AStartThatNeverRanLeavesNoRecordAndGivesBackTheOneItReplaced) {
  ASSERT_EQ(run("mkdir \"$MNT/procs/s\" && echo 'echo first' > \"$MNT/procs/s/cmd\" && cat \"$MNT/procs/s/wait\" >/dev/null").code,
            0);
  const std::string id = start("true");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  // What the crash left: s held aside and a new s that never ran; the
  // other record torn down to its spec.json alone.
  const RunResult r = run("set -e; cd \"$STATE\"; mv procs/s staging/held-7-s; mkdir procs/s; "
                          "cp staging/held-7-s/spec.json procs/s/; "
                          "cd procs/" + id + " && rm -f monitor.json exit.json log index");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(start_daemon()) << daemon_log();
  EXPECT_EQ(procs(), std::vector<std::string>{"s"});
  EXPECT_EQ(log("s"), "first\n");
  EXPECT_EQ(status_json("s")["exitCode"], 0);
  for (const std::string& e : list_dir(state_ + "/staging")) EXPECT_NE(e.rfind("held-", 0), 0u) << e;
}

}  // namespace
}  // namespace sbxit
