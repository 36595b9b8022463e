// -o allow_other: each command runs as the user who wrote the request, and a
// user sees and controls only their own commands (root: all).
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class AllowOtherTest : public SbxfsTest {
 protected:
  AllowOtherTest() { daemon_options_ = {"-o", "allow_other"}; }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for setpriv";
    SbxfsTest::SetUp();
    ::chmod(dir_.c_str(), 0755);  // let the other user reach the mount point
  }
  // `sh -c CMD` as uid/gid 65534 (nobody), from /.
  RunResult as_nobody(const std::string& cmd) {
    return run("cd / && exec setpriv --reuid 65534 --regid 65534 --clear-groups sh -c '" + cmd + "'");
  }
};

TEST_F(AllowOtherTest, CommandRunsAsTheWriter) {
  auto r = as_nobody("exec 3<>\"$MNT/cmd\"; echo \"id -u; id -g\" >&3; read -r id <&3; cat \"$MNT/procs/$id/wait\" >/dev/null; cat \"$MNT/procs/$id/log\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "65534\n65534\n");
}

// The daemon's environment is root's (here it has the fixture's T): another
// user's command gets its own login variables and none of it but PATH, TZ
// and the locale; root's command still gets it whole.
TEST_F(AllowOtherTest, AnotherUsersCommandGetsItsOwnEnvironmentNotTheDaemons) {
  const struct passwd* nobody = ::getpwuid(65534);
  ASSERT_NE(nobody, nullptr);
  auto r = as_nobody("exec 3<>\"$MNT/cmd\"; echo \"echo T=\\${T-none} HOME=\\$HOME USER=\\$USER; "
                     "test -n \\\"\\$PATH\\\" && echo path\" >&3; read -r id <&3; "
                     "cat \"$MNT/procs/$id/wait\" >/dev/null; cat \"$MNT/procs/$id/log\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "T=none HOME=" + std::string(nobody->pw_dir) + " USER=" + nobody->pw_name + "\npath\n");
  const std::string id = start("echo T=${T-none}");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "T=" + dir_ + "\n");
}

TEST_F(AllowOtherTest, AScriptLongerThanOneArgumentRunsAsTheWriter) {
  // Past 100 KiB the text runs from a file in the state directory, which
  // nobody cannot open: the monitor hands it over.
  const std::string script = dir_ + "/long.sh";
  {
    std::ofstream out(script);
    out << "id -u; echo \"$0\" | grep -c /proc/self/fd/\n";
    for (int i = 0; i < 3000; ++i) out << "# " << std::string(60, 'x') << "\n";
    out << "echo end; exit 3\n";
  }
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(script.c_str(), 0644), 0);
  auto r = as_nobody("exec 3<>\"$MNT/cmd\"; cat " + script + " >&3; read -r id <&3; "
                     "cat \"$MNT/procs/$id/wait\" >/dev/null; cat \"$MNT/procs/$id/log\"");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "65534\n1\nend\n") << r.err;
}

TEST_F(AllowOtherTest, AWorkingDirectoryTheWriterCannotSearchIsEacces) {
  // Root's own folder (0700): the monitor could change there, nobody cannot.
  const std::string closed = dir_ + "/closed";
  ASSERT_EQ(mkdir_errno(closed), 0);
  ASSERT_EQ(::chmod(closed.c_str(), 0700), 0);
  const std::string open = dir_ + "/open";
  ASSERT_EQ(mkdir_errno(open), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0755), 0);
  auto r = as_nobody("echo {\\\"cmd\\\": \\\"pwd\\\", \\\"cwd\\\": \\\"" + closed + "\\\"} > \"$MNT/cmd\"");
  EXPECT_NE(r.code, 0) << "started in a folder its user cannot enter";  // dash says "I/O error" for any errno
  ASSERT_FALSE(errors().empty());
  EXPECT_EQ(errors().back()["errno"], "EACCES");
  EXPECT_NE(errors().back()["error"].get<std::string>().find("cannot be searched by uid 65534"), std::string::npos)
      << errors().back();
  EXPECT_TRUE(procs().empty());
  // One it may enter runs, there.
  r = as_nobody("exec 3<>\"$MNT/cmd\"; echo {\\\"cmd\\\": \\\"pwd\\\", \\\"cwd\\\": \\\"" + open +
                "\\\"} >&3; read -r id <&3; cat \"$MNT/procs/$id/wait\" >/dev/null; cat \"$MNT/procs/$id/log\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, open + "\n");
  // Where the writer already is, though: there, as for any child of it.
  r = run("cd \"$D\" && exec setpriv --reuid 65534 --regid 65534 --clear-groups sh -c 'exec 3<>\"$MNT/cmd\"; "
          "echo pwd >&3; read -r id <&3; cat \"$MNT/procs/$id/wait\" >/dev/null; cat \"$MNT/procs/$id/log\"'",
          20, {{"D", closed}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, closed + "\n");
}

// A setuid program (su, root) writes its complaint, which quotes what its
// user gave it, to the `cmd` that user opened: the text runs, with the
// rights the file was opened with, never as root.
TEST_F(AllowOtherTest, ASetuidProgramWritingToTheUsersOpenCmdRunsNothingAsRoot) {
  if (::access("/bin/su", X_OK) != 0) GTEST_SKIP() << "no /bin/su";
  const std::string out = dir_ + "/out";
  ASSERT_EQ(mkdir_errno(out), 0);
  ASSERT_EQ(::chmod(out.c_str(), 01777), 0);
  auto r = as_nobody("su \"x; id -u > " + out + "/who; #\" 2> \"$MNT/cmd\"");
  ASSERT_TRUE(wait_until([&] { return !read_file(out + "/who").data.empty(); }, 10s)) << r.err;
  EXPECT_EQ(read_file(out + "/who").data, "65534\n");
  // The record is the opener's: it sees it.
  r = as_nobody("ls \"$MNT/procs\"");
  EXPECT_EQ(r.out, procs()[0] + "\n");
}

// The same, from a folder the opener may not search (a root shell's, left
// by setpriv): the writer's folder is no folder of the opener's, and is
// checked with the opener's rights: EACCES, nothing runs there.
TEST_F(AllowOtherTest, ASetuidWritersFolderIsCheckedWithTheOpenersRights) {
  if (::access("/bin/su", X_OK) != 0) GTEST_SKIP() << "no /bin/su";
  const std::string out = dir_ + "/out", closed = dir_ + "/closed";
  ASSERT_EQ(mkdir_errno(out), 0);
  ASSERT_EQ(::chmod(out.c_str(), 01777), 0);
  ASSERT_EQ(mkdir_errno(closed), 0);
  ASSERT_EQ(::chmod(closed.c_str(), 0700), 0);
  run("cd \"$D\" && exec setpriv --reuid 65534 --regid 65534 --clear-groups sh -c "
      "'su \"x; pwd > " + out + "/where; #\" 2> \"$MNT/cmd\"'",
      20, {{"D", closed}});
  EXPECT_TRUE(procs().empty()) << ::testing::PrintToString(procs());
  EXPECT_EQ(read_file(out + "/where").err, ENOENT) << read_file(out + "/where").data;
  ASSERT_FALSE(errors().empty());
  EXPECT_EQ(errors().back()["errno"], "EACCES") << errors().back();
}

// All of the writer's supplementary groups, however many (libfuse's own
// look at them stops at the buffer it is given).
TEST_F(AllowOtherTest, TheCommandHasEveryGroupOfItsWriter) {
  std::string groups;
  for (int g = 20000; g < 20100; ++g) groups += (groups.empty() ? "" : ",") + std::to_string(g);
  auto r = run("cd / && exec setpriv --reuid 65534 --regid 65534 --groups " + groups +
               " sh -c 'exec 3<>\"$MNT/cmd\"; echo \"id -G\" >&3; read -r id <&3; cat \"$MNT/procs/$id/wait\" >/dev/null; "
               "cat \"$MNT/procs/$id/log\"'");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string want = "65534";
  for (int g = 20000; g < 20100; ++g) want += " " + std::to_string(g);
  EXPECT_EQ(r.out, want + "\n");
}

// A folder the request names is checked as the command's user, then
// entered by the root monitor: were the path swapped meanwhile for a link
// into a folder that user cannot search, the command enters it again with
// its own rights and cannot start there. The daemon is held (strace)
// between the check and the monitor's start.
TEST_F(AllowOtherTest, AWorkingDirectorySwappedAfterItsCheckIsEnteredWithTheUsersRights) {
  const std::string open = dir_ + "/open", closed = dir_ + "/closed", inner = closed + "/pub", link = dir_ + "/link";
  for (const std::string& d : {open, closed, inner}) ASSERT_EQ(mkdir_errno(d), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(closed.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(inner.c_str(), 0755), 0);
  ASSERT_EQ(write_file(inner + "/flag", "FLAG\n", O_WRONLY | O_CREAT), 0);
  ASSERT_EQ(::chmod((inner + "/flag").c_str(), 0644), 0);
  ASSERT_EQ(::symlink(open.c_str(), link.c_str()), 0);
  std::string why;
  const pid_t tracer = trace_daemon("-e trace=socketpair -e inject=socketpair:delay_exit=1500000 -o /dev/null", why);
  if (tracer < 0) GTEST_SKIP() << "strace cannot trace the daemon here: " << why;
  const std::string said = dir_ + "/said";
  const pid_t writer =
      spawn_bg("cd / && exec setpriv --reuid 65534 --regid 65534 --clear-groups sh -c 'echo {\\\"cmd\\\": "
               "\\\"cat flag\\\", \\\"cwd\\\": \\\"" + link + "\\\"} > \"$MNT/cmd\"'",
               said);
  ASSERT_GT(writer, 0);
  // Checked and recorded: its spec.json is written before the launch is held.
  ASSERT_TRUE(wait_until([&] {
    for (const std::string& e : list_dir(state_ + "/staging"))
      if (read_file(state_ + "/staging/" + e + "/spec.json").data.find("cat flag") != std::string::npos) return true;
    return false;
  }, 10s));
  ASSERT_EQ(::unlink(link.c_str()), 0);
  ASSERT_EQ(::symlink(inner.c_str(), link.c_str()), 0);
  const std::optional<int> code = wait_bg(writer, 20s);
  ::kill(tracer, SIGKILL);
  wait_bg(tracer, 5s);
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0) << "started where its user cannot go";
  for (const std::string& id : procs()) EXPECT_EQ(log(id).find("FLAG"), std::string::npos) << id;
  ASSERT_FALSE(errors().empty());
  EXPECT_EQ(errors().back()["errno"], "EACCES") << errors().back();
}

// A queued command starts where its writer was, long after the writer
// has gone: by the folder's path, with the command's user's rights.
class AllowOtherQueueTest : public AllowOtherTest {
 protected:
  AllowOtherQueueTest() { daemon_options_ = {"-o", "allow_other,max_running=1"}; }
};
TEST_F(AllowOtherQueueTest, AQueuedCommandStartsInItsWritersFolderAfterTheWriterLeft) {
  auto r = as_nobody("exec 3<>\"$MNT/cmd\"; echo \"while [ ! -e $T/go ]; do sleep 0.02; done\" >&3; read -r id <&3; echo $id");
  ASSERT_EQ(r.code, 0) << r.err;
  r = run("cd \"$T\" && exec setpriv --reuid 65534 --regid 65534 --clear-groups sh -c "
          "'echo {\\\"cmd\\\": \\\"pwd\\\", \\\"queue\\\": true} > \"$MNT/cmd\"'");
  ASSERT_EQ(r.code, 0) << r.err;  // the writer is gone now
  ASSERT_EQ(procs().size(), 2u);
  const std::string queued = procs()[1];
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  const json w = wait_json(queued, 20);
  EXPECT_EQ(w["proc"]["exitCode"], 0) << w.dump();
  EXPECT_EQ(log(queued), dir_ + "\n");
}

// A slot's cmd held open across its rmdir, the name then made again by
// another user: the holder cannot run in that user's slot.
TEST_F(AllowOtherTest, ACmdHeldAcrossAnRmdirCannotRunInAnotherUsersSlotOfThatName) {
  const std::string out = dir_ + "/out";
  ASSERT_EQ(mkdir_errno(out), 0);
  ASSERT_EQ(::chmod(out.c_str(), 01777), 0);
  const pid_t holder = spawn_bg(
      "cd / && exec setpriv --reuid 65534 --regid 65534 --clear-groups sh -c '"
      "mkdir \"$MNT/procs/held\" && exec 5<>\"$MNT/procs/held/cmd\" && rmdir \"$MNT/procs/held\" && touch " + out +
          "/removed && while [ ! -e " + out + "/made ]; do sleep 0.02; done; echo \"id -u\" >&5; echo rc=$?'",
      out + "/said");
  ASSERT_GT(holder, 0);
  ASSERT_TRUE(wait_until([&] { return read_file(out + "/removed").err == 0; }, 10s)) << read_file(out + "/said").data;
  ASSERT_EQ(mkdir_errno(p("procs/held")), 0);  // root's slot now
  ASSERT_EQ(write_file(out + "/made", "", O_WRONLY | O_CREAT), 0);
  ASSERT_EQ(wait_bg(holder, 20s), std::optional<int>(0));
  EXPECT_NE(read_file(out + "/said").data.find("rc=1"), std::string::npos) << read_file(out + "/said").data;
  EXPECT_EQ(status_json("held")["state"], "empty");
}

// Every file of procs/NAME/ held open across an rmdir, once another user
// has made a record of that name: nothing written reaches its command
// (ENOENT), and nothing read shows it, neither while it runs nor once it
// has ended (its output, its end, its record).
TEST_F(AllowOtherTest, FilesHeldAcrossAnRmdirNeitherReadNorReachAnotherUsersRecordOfThatName) {
  const std::string out = dir_ + "/out";
  ASSERT_EQ(mkdir_errno(out), 0);
  ASSERT_EQ(::chmod(out.c_str(), 01777), 0);
  const std::string holder_py = R"(
import errno, os, sys, time
m, out = os.environ['MNT'] + '/procs/held/', sys.argv[1]
def until(name):
    while not os.path.exists(out + '/' + name): time.sleep(0.02)
os.mkdir(m)
reads = {n: os.open(m + n, os.O_RDONLY) for n in ('log', 'stdout', 'events', 'log,timestamps', 'wait', 'output')}
writes = {n: os.open(m + n, os.O_WRONLY) for n in ('stdin', 'signal', 'steps', 'stop', 'ready')}
os.rmdir(m)
open(out + '/removed', 'w').close()
until('made')
for n, data in (('stdin', b'INJECTED\n'), ('signal', b'USR1\n'), ('steps', b'start evil\n'), ('stop', b'\n'),
                ('ready', b'log key\n')):
    try:
        os.write(writes[n], data)
        os.close(writes[n])
        print(n, 'written')
    except OSError as e:
        print(n, errno.errorcode[e.errno])
open(out + '/wrote', 'w').close()
until('ended')
for n, fd in reads.items():
    try:
        got = os.pread(fd, 65536, 0)
        print(n, 'gone' if got == b'' or b'the record is gone' in got else got)
    except OSError as e:
        print(n, errno.errorcode[e.errno])
)";
  const std::string script = out + "/holder.py";
  ASSERT_EQ(write_file(script, holder_py, O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(::chmod(script.c_str(), 0644), 0);
  const pid_t holder = spawn_bg(
      "cd / && exec setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 " + script + " " + out,
      out + "/said");
  ASSERT_GT(holder, 0);
  ASSERT_TRUE(wait_until([&] { return read_file(out + "/removed").err == 0; }, 10s)) << read_file(out + "/said").data;
  // Root's record of that name now, with output and an input to write to.
  const std::string id = start(R"({"name": "held", "stdin": "pipe", "secretEnv": {"K": "root-only-value"}, )"
                               R"("cmd": "trap 'echo got USR1' USR1; echo key=$K; while read l; do echo in:$l; done"})");
  ASSERT_EQ(id, "held");
  ASSERT_TRUE(wait_until([&] { return log(id) == "key=***************\n"; }, 10s)) << log(id);
  ASSERT_EQ(write_file(out + "/made", "", O_WRONLY | O_CREAT), 0);
  ASSERT_TRUE(wait_until([&] { return read_file(out + "/wrote").err == 0; }, 10s)) << read_file(out + "/said").data;
  EXPECT_EQ(log(id), "key=***************\n");
  json st = status_json(id);
  EXPECT_EQ(st["running"], true) << st.dump();
  EXPECT_EQ(st["ready"], nullptr) << st.dump();
  EXPECT_EQ(parse_json(read_file(p("procs/held/steps.json")).data), json::array());
  // Ended (by root): the held files show nothing of it either.
  ASSERT_EQ(write_file(p("procs/held/stop"), "\n"), 0);
  ASSERT_EQ(write_file(out + "/ended", "", O_WRONLY | O_CREAT), 0);
  ASSERT_EQ(wait_bg(holder, 20s), std::optional<int>(0));
  EXPECT_EQ(read_file(out + "/said").data,
            "stdin ENOENT\nsignal ENOENT\nsteps ENOENT\nstop ENOENT\nready ENOENT\n"
            "log gone\nstdout gone\nevents gone\nlog,timestamps gone\nwait ENOENT\noutput ENOENT\n");
}

// A scratch file nobody renamed goes with a line in `errors`, which every
// user reads: what it held is not shown there, only its size.
class AllowOtherScratchTtlTest : public AllowOtherTest {
 protected:
  AllowOtherScratchTtlTest() { daemon_options_ = {"-o", "allow_other,scratch_ttl_ms=300"}; }
};
TEST_F(AllowOtherScratchTtlTest, AnExpiredScratchFilesContentIsNotInErrors) {
  ASSERT_EQ(as_nobody("printf \"draft: DB_PASSWORD=hunter2\\n\" > \"$MNT/.draft.tmp\"").code, 0);
  auto logged = [&] {
    for (const json& e : errors())
      if (e["path"] == ".draft.tmp") return true;
    return false;
  };
  ASSERT_TRUE(wait_until(logged, 10s)) << "no errors line for .draft.tmp";
  for (const json& e : errors())
    if (e["path"] == ".draft.tmp") {
      EXPECT_EQ(e["errno"], "ETIMEDOUT");
      EXPECT_EQ(e["request"], "(27 bytes, not shown: the file was its creator's alone)") << e.dump();
    }
  EXPECT_EQ(as_nobody("cat \"$MNT/errors\"").out.find("hunter2"), std::string::npos);
}

TEST_F(AllowOtherTest, OthersCommandsAreInvisibleAndUnstoppable) {
  std::string root_id = start("sleep 30");
  ASSERT_FALSE(root_id.empty());
  // nobody does not see it, cannot stop or signal it.
  auto ls = as_nobody("ls \"$MNT/procs\"");
  EXPECT_EQ(ls.out.find(root_id), std::string::npos) << ls.out;
  auto stop = as_nobody("echo > \"$MNT/procs/" + root_id + "/stop\"");
  EXPECT_NE(stop.code, 0);
  auto sig = as_nobody("echo KILL > \"$MNT/procs/" + root_id + "/signal\"");
  EXPECT_NE(sig.code, 0);
  EXPECT_EQ(status_json(root_id)["running"], true);
  // nobody's own command: root sees it too.
  auto mine = as_nobody("exec 3<>\"$MNT/cmd\"; echo \"sleep 30\" >&3; read -r id <&3; echo $id");
  ASSERT_EQ(mine.code, 0) << mine.err;
  std::string id = mine.out.substr(0, mine.out.find('\n'));
  json st = status_json(id);
  EXPECT_EQ(st["running"], true);
  // and nobody can stop its own.
  EXPECT_EQ(as_nobody("echo > \"$MNT/procs/" + id + "/stop\"").code, 0);
  EXPECT_EQ(status_json(id)["running"], false);
}

TEST_F(AllowOtherTest, RootStatusCountsOnlyTheReadersOwn) {
  const std::string root_running = start("sleep 30");
  const std::string root_ended = start("true");
  ASSERT_FALSE(root_running.empty() || root_ended.empty());
  wait_ended(root_ended);
  auto r = as_nobody(
      "exec 3<>\"$MNT/cmd\"; echo true >&3; read -r a <&3; exec 3>&-; cat \"$MNT/procs/$a/wait\" >/dev/null; "
      "exec 3<>\"$MNT/cmd\"; echo \"sleep 30\" >&3; read -r b <&3; exec 3>&-; echo $b; cat \"$MNT/status.json\"");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string mine = r.out.substr(0, r.out.find('\n'));
  json st = parse_json(r.out.substr(r.out.find('\n') + 1));
  ASSERT_TRUE(st.is_object()) << r.out;
  ASSERT_EQ(st["procs"].size(), 1u) << st["procs"].dump();
  EXPECT_EQ(st["procs"][0]["bgId"], mine);
  EXPECT_EQ(st["finished"], 1);
  json all = root_status();
  EXPECT_EQ(all["procs"].size(), 2u) << all["procs"].dump();
  EXPECT_EQ(all["finished"], 2);
  EXPECT_EQ(as_nobody("echo > \"$MNT/procs/" + mine + "/stop\"").code, 0);
}

// Scratch files (see writers_test.cpp) are private: names are per user.
TEST_F(AllowOtherTest, EachUserSeesOnlyTheirOwnScratchFiles) {
  RunResult r = as_nobody("echo nobodys > \"$MNT/.t.tmp\" && ls -a \"$MNT\" && cat \"$MNT/.t.tmp\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(".t.tmp\n"), std::string::npos) << r.out;
  std::vector<std::string> mine = list_dir(mnt_);
  EXPECT_EQ(std::find(mine.begin(), mine.end(), ".t.tmp"), mine.end()) << "root does not see it";
  EXPECT_EQ(stat_errno(p(".t.tmp")), ENOENT);
  // The same name is root's own scratch, not nobody's file.
  ASSERT_EQ(write_file(p(".t.tmp"), "roots\n", O_WRONLY | O_CREAT | O_EXCL), 0);
  EXPECT_EQ(file(".t.tmp"), "roots\n");
  r = as_nobody("cat \"$MNT/.t.tmp\"");
  EXPECT_EQ(r.out, "nobodys\n") << r.err;
  // nobody's rename onto cmd starts nobody's command.
  r = as_nobody("echo \"id -u\" > \"$MNT/.t.tmp\" && mv \"$MNT/.t.tmp\" \"$MNT/cmd\" && ls \"$MNT/procs\"");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  wait_ended(id);
  EXPECT_EQ(log(id), "65534\n");
  EXPECT_EQ(file(".t.tmp"), "roots\n") << "root's scratch is untouched";
}

}  // namespace
}  // namespace sbxit
