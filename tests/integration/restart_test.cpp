// The daemon dies or is stopped; its commands carry on and the next daemon
// serves them again. Also: one daemon per state directory and mount point.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class RestartTest : public SbxfsTest {
 protected:
  // Starts `sleep 30`, then kills the daemon, the command's monitor and the
  // command: what the next daemon finds after a crash of everything but the
  // state directory. Returns the record's id (empty: a step failed).
  std::string start_then_kill_all() {
    std::string a = start("sleep 30");
    if (a.empty()) return "";
    const pid_t pa = status_json(a)["pid"].get<pid_t>();
    auto mon = parse_json(read_file(state_ + "/procs/" + a + "/monitor.json").data);
    if (!mon.is_object() || !mon["monitorPid"].is_number_integer()) return "";
    const pid_t pm = mon["monitorPid"].get<pid_t>();
    if (kill_daemon(SIGKILL) != 128 + SIGKILL) return "";
    ::kill(pm, SIGKILL);
    ::kill(-pa, SIGKILL);
    return wait_until([&] { return !pid_alive(pm) && !pid_alive(pa); }, 5s) ? a : "";
  }
};

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST_F(RestartTest, ARestartAtOnceAfterKillNineWhileAShellSitsInTheMount) {
  // A shell whose working directory is in the tree keeps the dead mount
  // busy; the kernel still answers stat() of it from its attribute cache
  // for a while. The next daemon must see it dead all the same, at once.
  const pid_t holder = spawn_bg("cd \"$MNT/procs\" && exec sleep 30");
  ASSERT_TRUE(wait_until([&] { return read_file("/proc/" + std::to_string(holder) + "/cmdline").data.rfind("sleep", 0) == 0; }, 5s));
  struct stat st {};
  ASSERT_EQ(::stat(mnt_.c_str(), &st), 0);  // fresh in the attribute cache
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  EXPECT_TRUE(start_daemon()) << daemon_log();
  EXPECT_EQ(sbxfs_mount_count(mnt_), 1);
  EXPECT_FALSE(start("echo back").empty());
  ::kill(holder, SIGKILL);
  wait_bg(holder, 5s);
}

// While the next daemon takes the records back (here: waits for the state
// directory's lock, which the test holds), the dead mount stays: every
// access fails with ENOTCONN, never answered by the bare folder below (a
// request written there was a file of that folder, and lost).
TEST_F(RestartTest, TheDeadMountAnswersUntilTheNextDaemonMounts) {
  ASSERT_FALSE(start("sleep 30").empty());
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  const pid_t holder = spawn_bg("exec flock \"$STATE/lock\" sh -c 'while [ ! -e \"$T/release\" ]; do sleep 0.02; done'");
  ASSERT_GT(holder, 0);
  ASSERT_TRUE(wait_until([&] { return run("flock -n \"$STATE/lock\" true").code != 0; }, 5s));
  const std::string seen = dir_ + "/seen";
  const pid_t prober = spawn_bg("while :; do head -c 1 \"$MNT/cmd\" >/dev/null 2>>\"$T/seen\" || :; sleep 0.01; done");
  ASSERT_GT(prober, 0);
  auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  // The lock is let go once the probes have met the dead mount while the
  // new daemon waits for it (its second "starting" line).
  std::thread releaser([&] {
    wait_until([&] { return count(daemon_log(), " starting: ") >= 2; }, 10s);
    const std::size_t before = count(read_file(seen).data, "Transport endpoint is not connected");
    wait_until([&] { return count(read_file(seen).data, "Transport endpoint is not connected") >= before + 5; }, 10s);
    (void)write_file(dir_ + "/release", "", O_WRONLY | O_CREAT);
  });
  const bool started = start_daemon();
  releaser.join();
  ASSERT_TRUE(started) << daemon_log();
  ::kill(-prober, SIGKILL);
  wait_bg(prober, 5s);
  wait_bg(holder, 5s);
  const std::string said = read_file(seen).data;
  EXPECT_NE(said.find("Transport endpoint is not connected"), std::string::npos) << said;
  // The bare folder answers only between the detach and the mount (well
  // under the 10 ms between two tries), not while the records were loaded.
  EXPECT_LE(count(said, "No such file"), 1u) << said;
  EXPECT_EQ(procs().size(), 1u);
}

// Not even between the dead mount's detach and the new mount: the new
// mount is made beneath the dead one, which is detached after (as root).
// A creator of `cmd` that races the restarts would make it in the bare
// folder (a request written there is lost); the live tree has it already.
TEST_F(RestartTest, TheBareFolderNeverAnswersAcrossRestarts) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting beneath needs root";
  struct utsname u {};
  int major = 0, minor = 0;
  if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2 || major * 100 + minor < 605)
    GTEST_SKIP() << "mounting beneath needs Linux 6.5 (this is " << u.release << ")";
  const pid_t prober = spawn_bg(
      "exec python3 -c 'import os, sys\n"
      "m = sys.argv[1]\n"
      "while not os.path.exists(sys.argv[2]):\n"
      "    try:\n"
      "        os.close(os.open(m + \"/cmd\", os.O_WRONLY | os.O_CREAT | os.O_EXCL))\n"
      "        print(\"bare\", flush=True); os.unlink(m + \"/cmd\")\n"
      "    except OSError:\n"
      "        pass\n"
      "' \"$MNT\" \"$T/stop\"",
      dir_ + "/prober.out");
  ASSERT_GT(prober, 0);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
    ASSERT_TRUE(start_daemon()) << daemon_log();
  }
  ASSERT_EQ(write_file(dir_ + "/stop", "", O_WRONLY | O_CREAT), 0);
  EXPECT_EQ(wait_bg(prober, 10s), std::optional<int>(0));
  EXPECT_EQ(read_file(dir_ + "/prober.out").data, "");
  EXPECT_EQ(sbxfs_mount_count(mnt_), 1);
  EXPECT_FALSE(start("echo back").empty());
}

// A daemon told to stop while a start's command has been let go to exec
// (its execve held here for 2 s) waits for that start's outcome: the
// writer is told it started, and the record says it ran, not "EIO,
// nothing was started" for a command that was running.
TEST_F(RestartTest, AStopOfTheDaemonLetsAStartUnderWayFinish) {
  const auto server = run("pgrep -P " + std::to_string(daemon_pid()) + " -f sbxfs-monitor");
  const std::string server_pid = server.out.substr(0, server.out.find('\n'));
  ASSERT_FALSE(server_pid.empty()) << server.err;
  std::string why;
  const pid_t tracer =
      trace(std::stoi(server_pid), "-e trace=execve -e inject=execve:delay_enter=2000000 -o /dev/null", why);
  if (tracer < 0) GTEST_SKIP() << "strace cannot trace the monitor server here: " << why;
  const pid_t writer = spawn_bg("exec 3<>\"$MNT/cmd\"; echo 'echo ran > \"$T/ran\"' >&3; echo \"w=$?\"",
                                dir_ + "/writer.out");
  ASSERT_GT(writer, 0);
  // Published before it is let go: listed, and its execve held.
  ASSERT_TRUE(wait_until([&] { return procs().size() == 1; }, 10s));
  const std::string id = procs()[0];
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  EXPECT_EQ(wait_bg(writer, 10s), std::optional<int>(0));
  EXPECT_EQ(read_file(dir_ + "/writer.out").data, "w=0\n");
  ::kill(tracer, SIGKILL);
  wait_bg(tracer, 5s);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  const json w = wait_json(id);
  EXPECT_EQ(w["proc"]["exitCode"], 0) << w.dump();
  EXPECT_EQ(read_file(dir_ + "/ran").data, "ran\n");
}

TEST_F(RestartTest, KillNineThenRestart) {
  std::string a = start("sleep 30");
  std::string b = start("while [ ! -e '" + dir_ + "/go' ]; do sleep 0.05; done; exit 5");
  std::string c = start("exit 3");
  ASSERT_FALSE(a.empty() || b.empty() || c.empty());
  wait_ended(c);
  pid_t pa = status_json(a)["pid"].get<pid_t>();
  pid_t pb = status_json(b)["pid"].get<pid_t>();
  // A reader blocked in wait when the daemon dies.
  pid_t waiter = spawn_bg("exec cat \"$MNT/procs/" + a + "/wait\"", dir_ + "/waiter.out");
  wait_until([&] { return blocked_in_fuse(waiter); }, 3s);

  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  // The old mount is dead: ENOTCONN, for syscalls and for shells.
  EXPECT_EQ(sbxfs_mount_count(mnt_), 1) << "the stale mount stays until the next start";
  // (stat() may still be answered from the attribute cache; open() may not.)
  EXPECT_EQ(read_file(p("status.json")).err, ENOTCONN);
  EXPECT_EQ(read_file(p("procs/" + a + "/status.json")).err, ENOTCONN);
  auto ls = run("ls \"$MNT\"");
  EXPECT_NE(ls.code, 0);
  EXPECT_NE(ls.err.find("Transport endpoint is not connected"), std::string::npos) << ls.err;
  EXPECT_EQ(write_file(p("cmd"), "true\n"), ENOTCONN);
  auto wrc = wait_bg(waiter, 10s);
  ASSERT_TRUE(wrc.has_value()) << "the blocked wait reader was not released by the crash";
  EXPECT_NE(*wrc, 0);
  // The commands carry on without the daemon; B ends meanwhile.
  EXPECT_TRUE(pid_alive(pa));
  EXPECT_TRUE(pid_alive(pb));
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  ASSERT_TRUE(wait_until([&] { return !pid_alive(pb); }, 5s));
  // Its monitor writes the end a moment after: on disk before the new daemon.
  ASSERT_TRUE(wait_until([&] { return stat_errno(state_ + "/procs/" + b + "/exit.json") == 0; }, 10s));

  ASSERT_TRUE(start_daemon()) << "the new daemon must clean up the stale mount";
  EXPECT_EQ(sbxfs_mount_count(mnt_), 1) << "the stale mount was not removed";
  auto names = procs();
  EXPECT_TRUE(contains(names, a) && contains(names, b) && contains(names, c));
  auto sa = status_json(a);
  EXPECT_EQ(sa["running"], true);
  EXPECT_EQ(sa["pid"], pa);
  auto sb = status_json(b);
  EXPECT_EQ(sb["running"], false);
  EXPECT_EQ(sb["exitCode"], 5) << "B ended while no daemon ran; its real exit code is recovered";
  EXPECT_EQ(sb["endReason"], "exited");
  EXPECT_TRUE(is_iso_time(sb["finishedAt"]));
  EXPECT_EQ(status_json(c)["exitCode"], 3);
  auto root = root_status();
  ASSERT_TRUE(root["procs"].is_array());
  ASSERT_EQ(root["procs"].size(), 1u) << root.dump();
  EXPECT_EQ(root["procs"][0]["bgId"], a);
  EXPECT_EQ(root["finished"], 2);
  EXPECT_EQ(root["supervisor"]["pid"], daemon_pid());
  EXPECT_EQ(log(c), "");
  // A is stoppable as before.
  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", a}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(pid_alive(pa));
  EXPECT_EQ(status_json(a)["endReason"], "stopped");
  // Ids are never reused.
  std::string d = start("true");
  EXPECT_GT(d, c);
}

TEST_F(RestartTest, WaitAfterRestartSeesTheEnd) {
  std::string a = start("while [ ! -e '" + dir_ + "/go' ]; do sleep 0.05; done; echo done; exit 9");
  ASSERT_FALSE(a.empty());
  ASSERT_TRUE(restart_daemon());
  const std::string out = dir_ + "/wait.out";
  pid_t waiter = spawn_bg("exec cat \"$MNT/procs/" + a + "/wait\"", out);
  EXPECT_FALSE(wait_bg(waiter, 300ms).has_value()) << "wait returned while the command runs";
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  auto rc = wait_bg(waiter, 10s);
  ASSERT_TRUE(rc.has_value()) << "the re-adopted command's end did not wake wait";
  auto w = parse_json(read_file(out).data);
  ASSERT_TRUE(w.is_object()) << read_file(out).data;
  EXPECT_EQ(w["proc"]["exitCode"], 9);
  EXPECT_EQ(w["proc"]["logTail"], "done\n") << "output after the restart is still logged";
}

TEST_F(RestartTest, UnknownWhenMonitorVanishedToo) {
  const std::string a = start_then_kill_all();
  ASSERT_FALSE(a.empty());
  ASSERT_TRUE(start_daemon());
  auto s = status_json(a);
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["exitCode"], -1);
  EXPECT_EQ(s["endReason"], "unknown");
}

// A monitor killed between writing its end (exit.json.tmp) and the rename:
// the end it wrote is the record's, not "unknown".
TEST_F(RestartTest, AnEndWrittenButNotRenamedIsKept) {
  const std::string a = start_then_kill_all();
  ASSERT_FALSE(a.empty());
  const std::string dir = state_ + "/procs/" + a;
  // As the monitor leaves it: its end written over the reserved blanks, not yet truncated.
  const std::string finished = iso_time_ago(60);
  const std::string end =
      R"({"exitCode": -1, "signal": "SIGKILL", "endReason": "killed", "timedOut": false, )"
      R"("finishedAt": ")" + finished + R"(", "oom": false, "outputLost": 0})";
  const int fd = ::open((dir + "/exit.json.tmp").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0) << "the monitor reserves exit.json.tmp at the start";
  ASSERT_EQ(::pwrite(fd, end.data(), end.size(), 0), static_cast<ssize_t>(end.size()));
  ::close(fd);
  ASSERT_TRUE(start_daemon());
  auto s = status_json(a);
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["endReason"], "killed") << s.dump();
  EXPECT_EQ(s["signal"], "SIGKILL") << s.dump();
  EXPECT_EQ(s["finishedAt"], finished) << s.dump();
  EXPECT_FALSE(std::filesystem::exists(dir + "/exit.json.tmp"));
}

TEST_F(RestartTest, SigtermUnmountsAndCommandsKeepRunning) {
  std::string a = start("sleep 30");
  ASSERT_FALSE(a.empty());
  pid_t pa = status_json(a)["pid"].get<pid_t>();
  EXPECT_EQ(kill_daemon(SIGTERM), 0) << "SIGTERM: unmount and exit 0";
  EXPECT_EQ(sbxfs_mount_count(mnt_), 0) << "unmounted cleanly";
  EXPECT_TRUE(pid_alive(pa)) << "the command keeps running";
  ASSERT_TRUE(start_daemon());
  auto s = status_json(a);
  EXPECT_EQ(s["running"], true);
  EXPECT_EQ(s["pid"], pa);
  EXPECT_EQ(run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", a}}).code, 0);
  EXPECT_FALSE(pid_alive(pa));
}

TEST_F(RestartTest, SigintUnmountsToo) {
  EXPECT_EQ(kill_daemon(SIGINT), 0);
  EXPECT_EQ(sbxfs_mount_count(mnt_), 0);
}

TEST_F(RestartTest, FusermountUnmountEndsTheDaemon) {
  std::string a = start("sleep 30");
  ASSERT_FALSE(a.empty());
  pid_t pa = status_json(a)["pid"].get<pid_t>();
  auto r = run_argv({"fusermount3", "-u", mnt_}, 10);
  EXPECT_EQ(r.code, 0) << r.err;
  pid_t d = daemon_pid();
  int st = 0;
  EXPECT_TRUE(wait_until([&] { return ::waitpid(d, &st, WNOHANG) == d; }, 5s)) << "the daemon did not exit";
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  adopt_daemon(0);
  EXPECT_TRUE(pid_alive(pa));
  ASSERT_TRUE(start_daemon());
  EXPECT_EQ(status_json(a)["running"], true);
}

// A lazy unmount detaches the mount while a reader is parked on `wait` and a
// shell has its working directory inside: the connection lives on, but the
// daemon notices at once, answers the reader, and exits (releasing the
// state directory), so the next daemon starts on it.
TEST_F(RestartTest, LazyUnmountEndsTheDaemonAtOnce) {
  std::string a = start("sleep 30");
  std::string b = start("exit 4");
  ASSERT_FALSE(a.empty() || b.empty());
  wait_ended(b);
  pid_t pa = status_json(a)["pid"].get<pid_t>();
  pid_t waiter = spawn_bg("exec cat \"$MNT/procs/" + a + "/wait\"", dir_ + "/waiter.out");
  ASSERT_TRUE(wait_until([&] { return blocked_in_fuse(waiter); }, 3s));
  spawn_bg("cd \"$MNT/procs\" && exec sleep 30");
  const pid_t d = daemon_pid();
  auto r = run_argv({"fusermount3", "-uz", mnt_}, 10);
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t0 = Clock::now();
  auto wrc = wait_bg(waiter, 10s);
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(wrc.has_value()) << "the parked reader was not answered";
  EXPECT_NE(*wrc, 0) << "an error, not an answer";
  // Held, it would wait 30 s; answered, milliseconds (room for a loaded machine).
  EXPECT_LT(took, 5.0) << "the daemon took " << took << " s to answer the parked reader";
  // (Its exit may take a while longer in the sanitizer build: the leak check.)
  int st = 0;
  EXPECT_TRUE(wait_until([&] { return ::waitpid(d, &st, WNOHANG) == d; }, 5s)) << "the daemon did not exit";
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  EXPECT_NE(daemon_log().find("left the mount table"), std::string::npos) << daemon_log();
  adopt_daemon(0);
  EXPECT_TRUE(pid_alive(pa)) << "the command keeps running";

  ASSERT_TRUE(start_daemon()) << daemon_log();
  EXPECT_EQ(sbxfs_mount_count(mnt_), 1);
  auto names = procs();
  EXPECT_TRUE(contains(names, a) && contains(names, b));
  EXPECT_EQ(status_json(a)["running"], true);
  EXPECT_EQ(status_json(b)["exitCode"], 4);
}

TEST_F(RestartTest, CorruptRecordLoadsAsError) {
  std::string a = start("exit 1");
  std::string b = start("exit 2");
  wait_ended(a);
  wait_ended(b);
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  ASSERT_EQ(write_file(state_ + "/procs/" + a + "/exit.json", "{ this is not json", O_WRONLY | O_TRUNC), 0);
  ASSERT_TRUE(start_daemon());
  auto s = status_json(a);
  EXPECT_EQ(s["state"], "error") << s.dump();
  EXPECT_TRUE(s["error"].is_object() && s["error"]["message"].is_string()) << s.dump();
  EXPECT_EQ(status_json(b)["exitCode"], 2) << "the other records load normally";
  EXPECT_NE(daemon_log().find("record " + a + " cannot be read: "), std::string::npos) << daemon_log();
  EXPECT_EQ(daemon_log().find("record " + b + " "), std::string::npos) << daemon_log();
}

// A record of a running command whose spec.json or monitor.json is torn
// when the daemon starts: its monitor still answers, so it is still
// supervised. It shows running with its error, cannot be removed while it
// runs, and `stop` ends it (returning once it has ended).
TEST_F(RestartTest, ARunningCommandWhoseRecordIsTornIsStillSupervised) {
  const std::vector<std::string> ids = {start(R"({"cmd": "exec sleep 300", "name": "torn-monitor"})"),
                                        start(R"({"cmd": "exec sleep 301", "name": "torn-spec"})")};
  ASSERT_EQ(ids, (std::vector<std::string>{"torn-monitor", "torn-spec"}));
  std::vector<pid_t> pids;
  for (const std::string& id : ids) pids.push_back(status_json(id)["pid"].get<pid_t>());
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(write_file(state_ + "/procs/torn-monitor/monitor.json", "{ torn", O_WRONLY | O_TRUNC), 0);
  ASSERT_EQ(write_file(state_ + "/procs/torn-spec/spec.json", "{ torn", O_WRONLY | O_TRUNC), 0);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  for (const std::string& id : ids)
    EXPECT_NE(daemon_log().find("record " + id + " cannot be read: "), std::string::npos) << daemon_log();
  EXPECT_NE(daemon_log().find("(its command runs on, supervised)"), std::string::npos) << daemon_log();
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::string& id = ids[i];
    json s = status_json(id);
    EXPECT_EQ(s["running"], true) << s.dump();
    EXPECT_EQ(s["state"], "running") << s.dump();
    EXPECT_TRUE(s["error"].is_object()) << s.dump();
    EXPECT_EQ(rmdir_errno(p("procs/" + id)), EBUSY);
    EXPECT_TRUE(pid_alive(pids[i])) << id;
    EXPECT_EQ(write_file(p("procs/" + id + "/stop"), "\n"), 0) << id;
    EXPECT_FALSE(pid_alive(pids[i])) << id << ": stop returned before the command ended";
    s = status_json(id);
    EXPECT_EQ(s["running"], false) << s.dump();
    EXPECT_EQ(s["state"], "error") << "a file of it is still torn: " << s.dump();
    EXPECT_EQ(rmdir_errno(p("procs/" + id)), 0) << id;
  }
}

// The monitor of a record whose monitor.json is torn is still watched: when
// it is killed, the record ends (unknown) and what it ran is ended too.
TEST_F(RestartTest, TheDeathOfATornRecordsMonitorIsSeen) {
  ASSERT_EQ(start(R"({"cmd": "exec sleep 302", "name": "torn-dies"})"), "torn-dies");
  const pid_t pid = status_json("torn-dies")["pid"].get<pid_t>();
  const json mon = parse_json(read_file(state_ + "/procs/torn-dies/monitor.json").data);
  ASSERT_TRUE(mon.is_object());
  const pid_t monitor = mon["monitorPid"].get<pid_t>();
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(write_file(state_ + "/procs/torn-dies/monitor.json", "{ torn", O_WRONLY | O_TRUNC), 0);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  ASSERT_EQ(status_json("torn-dies")["running"], true);
  ASSERT_EQ(::kill(monitor, SIGKILL), 0);
  const json s = wait_ended("torn-dies", 15s);
  EXPECT_EQ(s["running"], false) << s.dump();
  EXPECT_EQ(s["state"], "error") << s.dump();
  EXPECT_TRUE(wait_until([&] { return !pid_alive(pid); }, 10s)) << "the command outlived its monitor";
  EXPECT_EQ(rmdir_errno(p("procs/torn-dies")), 0);
}

// The kernel sends no RELEASE for files still open when the mount goes away:
// the daemon frees them itself (in the sanitizer build, a leak report in its
// log fails the test).
TEST_F(RestartTest, FilesOpenAtUnmountAreFreed) {
  std::string id = start("sleep 30");
  const int file = ::open(p("procs/" + id + "/status.json").c_str(), O_RDONLY);
  ASSERT_GE(file, 0);
  char byte;
  ASSERT_EQ(::read(file, &byte, 1), 1);
  const int dir = ::open(p("procs").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  EXPECT_EQ(kill_daemon(SIGTERM), 0);
  ::close(file);
  ::close(dir);
  EXPECT_EQ(daemon_log().find("LeakSanitizer"), std::string::npos) << daemon_log();
}

TEST_F(RestartTest, ARestartRightAfterAnUnmountWaitsForTheOldDaemonToLetGo) {
  // The daemon that `fusermount3 -u` ends holds the state directory a few
  // milliseconds more; the next one, started at once, waits for it.
  const std::string a = start("sleep 30");
  ASSERT_FALSE(a.empty());
  for (int i = 0; i < 5; ++i) {
    const pid_t old = daemon_pid();
    auto r = run_argv({"fusermount3", "-u", mnt_}, 10);
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(start_daemon()) << daemon_log();
    int status = 0;
    EXPECT_EQ(::waitpid(old, &status, 0), old);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_EQ(status_json(a)["running"], true);
  }
}

TEST_F(RestartTest, SecondDaemonOnTheSameStateDirIsRefused) {
  ASSERT_EQ(mkdir_errno(dir_ + "/mnt2"), 0);
  auto r = run_argv({SBXFS_PATH, "-f", "--state-dir", state_, dir_ + "/mnt2"}, 10);
  if (sbxfs_mount_count(dir_ + "/mnt2") > 0) run_argv({"fusermount3", "-uz", dir_ + "/mnt2"}, 10);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("in use by pid " + std::to_string(daemon_pid())), std::string::npos) << r.err;
  EXPECT_EQ(stat_errno(p("status.json")), 0) << "the first daemon still serves";
  // The same without -f.
  r = run_argv({SBXFS_PATH, "--state-dir", state_, dir_ + "/mnt2"}, 10);
  if (sbxfs_mount_count(dir_ + "/mnt2") > 0) run_argv({"fusermount3", "-uz", dir_ + "/mnt2"}, 10);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("in use"), std::string::npos) << r.err;
}

TEST_F(RestartTest, AStateDirectoryInsideAnothersOwnFoldersIsRefused) {
  // sbxfs@X keeps its records in /var/lib/sbxfs/X, inside the default
  // daemon's: an instance named staging or procs would mix the two (the
  // default sweeps staging/ of what it does not know).
  const std::string a = start("sleep 30");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(mkdir_errno(dir_ + "/mnt2"), 0);
  for (const std::string own : {"staging", "procs", "scripts", "steps"}) {
    auto r = run_argv({SBXFS_PATH, "-f", "--state-dir", state_ + "/" + own + "/", dir_ + "/mnt2"}, 10);
    if (sbxfs_mount_count(dir_ + "/mnt2") > 0) run_argv({"fusermount3", "-uz", dir_ + "/mnt2"}, 10);
    EXPECT_EQ(r.code, 1) << own;
    EXPECT_NE(r.err.find("is inside the " + own + " of the state directory " + state_), std::string::npos) << r.err;
  }
  EXPECT_EQ(stat_errno(state_ + "/scripts"), ENOENT) << "nothing made";
  // The other way: the inner one was there first; the outer is refused
  // before it touches anything.
  const std::string outer = dir_ + "/outer";
  ASSERT_EQ(mkdir_errno(outer), 0);
  ASSERT_EQ(mkdir_errno(outer + "/staging"), 0);
  ASSERT_EQ(mkdir_errno(outer + "/staging/procs"), 0);
  ASSERT_EQ(write_file(outer + "/staging/lock", "1\n", O_WRONLY | O_CREAT), 0);
  auto r = run_argv({SBXFS_PATH, "-f", "--state-dir", outer, dir_ + "/mnt2"}, 10);
  if (sbxfs_mount_count(dir_ + "/mnt2") > 0) run_argv({"fusermount3", "-uz", dir_ + "/mnt2"}, 10);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("holds another state directory in its staging"), std::string::npos) << r.err;
  EXPECT_EQ(stat_errno(outer + "/staging/lock"), 0) << "left alone";
  EXPECT_EQ(stat_errno(outer + "/procs"), ENOENT);
  // A record named lock is a folder, not a state directory's lock.
  ASSERT_EQ(mkdir_errno(p("procs/lock")), 0);
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(start_daemon()) << daemon_log();
  EXPECT_EQ(status_json(a)["running"], true);
  EXPECT_EQ(stat_errno(p("procs/lock")), 0);
}

TEST_F(RestartTest, LiveMountAtTheMountPointIsRefused) {
  auto r = run_argv({SBXFS_PATH, "-f", "--state-dir", dir_ + "/state2", mnt_}, 10);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("a live sbxfs is already mounted at " + mnt_), std::string::npos) << r.err;
  EXPECT_EQ(stat_errno(dir_ + "/state2"), ENOENT) << "a refused start makes no state directory";
  // The same without -f.
  r = run_argv({SBXFS_PATH, "--state-dir", dir_ + "/state2", mnt_}, 10);
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("a live sbxfs is already mounted at"), std::string::npos) << r.err;
  EXPECT_EQ(stat_errno(dir_ + "/state2"), ENOENT);
  EXPECT_EQ(sbxfs_mount_count(mnt_), 1);
  // Named through a symbolic link, to it or to its folder: the same place.
  ASSERT_EQ(::symlink(mnt_.c_str(), (dir_ + "/to-mnt").c_str()), 0);
  ASSERT_EQ(::symlink(dir_.c_str(), (dir_ + "/to-dir").c_str()), 0);
  for (const std::string& named : {dir_ + "/to-mnt", dir_ + "/to-dir/mnt"}) {
    r = run_argv({SBXFS_PATH, "-f", "--state-dir", dir_ + "/state2", named}, 10);
    if (sbxfs_mount_count(mnt_) > 1) run_argv({"fusermount3", "-u", mnt_}, 10);  // the one on top
    EXPECT_EQ(r.code, 1) << named << ": " << r.err;
    EXPECT_NE(r.err.find("a live sbxfs is already mounted at " + mnt_), std::string::npos) << r.err;
  }
  EXPECT_EQ(sbxfs_mount_count(mnt_), 1);
  EXPECT_EQ(stat_errno(p("status.json")), 0) << "the first daemon still serves";
  EXPECT_EQ(root_status()["supervisor"]["pid"], daemon_pid());
}

TEST_F(RestartTest, BackgroundModeReturnsOnceMounted) {
  std::string a = start("sleep 30");
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  auto r = run_argv({SBXFS_PATH, "--state-dir", state_, mnt_}, 10);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 5.0);
  // Mounted when it returned: no waiting.
  EXPECT_EQ(sbxfs_mount_count(mnt_), 1);
  auto root = root_status();
  ASSERT_TRUE(root.is_object());
  ASSERT_TRUE(root["supervisor"]["pid"].is_number_integer());
  pid_t bg = root["supervisor"]["pid"].get<pid_t>();
  adopt_daemon(bg);
  EXPECT_TRUE(pid_alive(bg));
  EXPECT_EQ(status_json(a)["running"], true);
  // It keeps serving after the starter returned.
  std::string b = start("exit 4");
  EXPECT_EQ(wait_json(b)["proc"]["exitCode"], 4);
  // And SIGTERM unmounts it.
  EXPECT_EQ(kill_daemon(SIGTERM), 0);
  EXPECT_EQ(sbxfs_mount_count(mnt_), 0);
  ASSERT_TRUE(start_daemon());
}

}  // namespace
}  // namespace sbxit
