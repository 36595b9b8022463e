// The daemon's command line, without a mount.
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

namespace {

struct Out {
  int code = -1;
  std::string text;
};

/// `sh -c CMD`, its stdout and stderr together.
Out run_shell(const std::string& sh_command) {
  Out o;
  const std::string cmd = "{ " + sh_command + "; } 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return o;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) o.text.append(buf, n);
  int st = ::pclose(f);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
}

Out run_daemon(const std::string& args) { return run_shell("timeout 10 '" SBXFS_PATH "' " + args); }

/// Unmounts whatever is mounted below `dir` (a daemon that should have been
/// refused), then removes it.
void remove_test_dir(const std::string& dir) {
  // A daemon goes a little after its unmount, tidying its state directory
  // (spare folders) on the way, and holds the directory's lock until it has
  // gone: each lock is waited for before anything is removed.
  run_shell("for i in 1 2 3; do for m in $(grep -o ' " + dir +
            "/[^ ]*' /proc/mounts | sort -r); do fusermount3 -u $m || fusermount3 -uz $m; done; done; " +
            "for l in $(find " + dir + " -name lock -type f 2>/dev/null); do flock -w 10 $l true; done");
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  EXPECT_FALSE(ec) << "removing " << dir << ": " << ec.message();
}

TEST(DaemonCli, Help) {
  for (const char* flag : {"--help", "-h"}) {
    auto o = run_daemon(flag);
    EXPECT_EQ(o.code, 0) << flag << ": " << o.text;
    EXPECT_NE(o.text.find("--state-dir"), std::string::npos) << o.text;
    EXPECT_NE(o.text.find("wait_timeout"), std::string::npos) << o.text;
  }
}

TEST(DaemonCli, Version) {
  for (const char* flag : {"--version", "-V"}) {
    auto o = run_daemon(flag);
    EXPECT_EQ(o.code, 0) << flag << ": " << o.text;
    EXPECT_NE(o.text.find("0."), std::string::npos) << "a version number: " << o.text;
  }
}

TEST(DaemonCli, AStateDirectoryInTheMountPointIsRefused) {
  char tmpl[] = "/tmp/sbxfs-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string t = tmpl;
  for (const auto& [state, mnt, why] :
       {std::tuple{t + "/m/st", t + "/m", "the state directory " + t + "/m/st is the mount point " + t + "/m or inside it"},
        std::tuple{t + "/m", t + "/m", "the state directory " + t + "/m is the mount point " + t + "/m or inside it"},
        std::tuple{t + "/s", t + "/s/m", "the mount point " + t + "/s/m is inside the state directory " + t + "/s"}}) {
    for (const char* fg : {"-f ", ""}) {
      auto o = run_daemon(fg + std::string("--state-dir ") + state + " " + mnt);
      EXPECT_EQ(o.code, 1) << o.text;
      EXPECT_NE(o.text.find(why), std::string::npos) << o.text;
    }
  }
  // Through a symbolic link to a folder of the mount point's.
  ASSERT_EQ(::symlink(tmpl, (t + "/link").c_str()), 0);
  auto o = run_daemon("-f --state-dir " + t + "/link/m/st " + t + "/m");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("is the mount point " + t + "/m or inside it"), std::string::npos) << o.text;
  EXPECT_FALSE(std::filesystem::exists(t + "/m")) << "nothing made";
  remove_test_dir(tmpl);
}

// In the background the daemon's messages go to STATE/sbxfs.log, a line
// for every refused request: past its size the file becomes sbxfs.log.1
// and begins anew, so that refusals cannot fill the disk.
TEST(DaemonCli, TheBackgroundLogIsRenamedAndBegunAnewPastItsSize) {
  char tmpl[] = "/tmp/sbxfs-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string t = tmpl;
  auto o = run_shell("mkdir " + t + "/m && timeout 10 '" SBXFS_PATH "' --state-dir " + t + "/st -o daemon_log_max=4096 " +
                     t + "/m && for i in $(seq 100); do echo '{\"bogus\": '$i'}' > " + t + "/m/cmd; done; echo done");
  EXPECT_NE(o.text.find("done"), std::string::npos) << o.text;
  const std::string log = t + "/st/sbxfs.log";
  std::error_code ec;
  const auto now = std::filesystem::file_size(log, ec);
  EXPECT_FALSE(ec) << ec.message();
  const auto old = std::filesystem::file_size(log + ".1", ec);
  EXPECT_FALSE(ec) << "no sbxfs.log.1: " << ec.message();
  // Each past 4096 bytes by one line at most (a line is under 1 KiB here).
  EXPECT_LT(now, 4096u + 1024u);
  EXPECT_GE(old, 4096u);
  EXPECT_LT(old, 4096u + 1024u);
  std::string text;
  {
    std::ifstream in(log + ".1");
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(text.find("rejected"), std::string::npos) << text;
  remove_test_dir(t);
}

// The systemd units name STATE/pid as the daemon's PIDFile: once a
// background start has returned, it (and the lock) holds the pid of the
// process that serves the mount (not the one that started it), whose
// SIGTERM unmounts. A second daemon refused there leaves both alone.
TEST(DaemonCli, ThePidFileHoldsThePidOfTheDaemonThatServesTheMount) {
  char tmpl[] = "/tmp/sbxfs-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string t = tmpl;
  auto o = run_shell("T=" + t + "; mkdir $T/m && timeout 10 '" SBXFS_PATH "' --state-dir $T/st $T/m && " +
                     "P=$(cat $T/st/pid) && [ \"$P\" = \"$(cat $T/st/lock)\" ] && " +
                     "echo \"fuse fds $(ls -l /proc/$P/fd | grep -c /dev/fuse)\" && mkdir $T/m2 && " +
                     "{ timeout 30 '" SBXFS_PATH "' --state-dir $T/st $T/m2; echo \"second $?\"; } && " +
                     "[ \"$(cat $T/st/pid)\" = \"$P\" ] && echo 'pid kept' && " +
                     "kill -TERM $P && for i in $(seq 200); do grep -q \" $T/m \" /proc/mounts || " +
                     "{ echo unmounted; break; }; sleep 0.05; done");
  EXPECT_NE(o.text.find("fuse fds 1"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("second 1"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("pid kept"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("unmounted"), std::string::npos) << o.text;
  remove_test_dir(t);
}

TEST(DaemonCli, OfTwoDaemonsStartedAtOnceAtOneMountPointOneMounts) {
  char tmpl[] = "/tmp/sbxfs-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string t = tmpl;
  // Each with a state directory of its own: only the mount point is shared.
  // A race, so three rounds.
  for (int round = 0; round < 3; ++round) {
    const std::string m = t + "/m" + std::to_string(round);
    auto o = run_shell("M=" + m + "; T=" + t + "; S='" SBXFS_PATH "'; mkdir -p $M; " +
                       "(timeout 10 $S --state-dir $T/a$M $M; echo \"rc $?\") & " +
                       "(timeout 10 $S --state-dir $T/b$M $M; echo \"rc $?\") & wait; " +
                       "echo mounts $(grep -c \" $M \" /proc/mounts); fusermount3 -u $M");
    EXPECT_NE(o.text.find("rc 0"), std::string::npos) << o.text;
    EXPECT_NE(o.text.find("rc 1"), std::string::npos) << o.text;
    EXPECT_NE(o.text.find("a live sbxfs is already mounted at " + m), std::string::npos) << o.text;
    EXPECT_NE(o.text.find("mounts 1"), std::string::npos) << o.text;
  }
  remove_test_dir(tmpl);
}

}  // namespace

TEST(DaemonCli, LimitsAreDocumentedAndCheckedBeforeMounting) {
  auto help = run_daemon("--help");
  for (const char* opt : {"keep_ended=", "keep_ended_sec=", "max_running="})
    EXPECT_NE(help.text.find(opt), std::string::npos) << opt << " missing from --help";
  // Refused before anything is mounted or created (no such mount point needed).
  auto o = run_daemon("-f -o keep_ended_sec=99999999999 /nonexistent/sbxfs-cli-test");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("keep_ended_sec=99999999999: not a whole number from 0 to 3162240000"), std::string::npos)
      << o.text;
}

TEST(DaemonCli, NumbersAreDigitsInTheirRangeAndTheStateDirIsAPath) {
  // Each refused by name before anything is mounted or created; sscanf
  // would have taken the first four.
  for (const char* opt : {"wait_timeout=-5", "wait_timeout=5abc", "wait_timeout=1.5", "keep_ended=-1",
                          "wait_timeout=0x10", "wait_timeout=0", "start_timeout=0", "max_request=0", "output_max=",
                          "max_running_per_user=-1", "log_max=1x", "max_running=18446744073709551616"}) {
    auto o = run_daemon(std::string("-f -o ") + opt + " /nonexistent/sbxfs-cli-test");
    EXPECT_EQ(o.code, 1) << opt << ": " << o.text;
    EXPECT_NE(o.text.find(std::string(opt) + ": not a whole number from "), std::string::npos) << o.text;
  }
  auto o = run_daemon("-f --state-dir '' /nonexistent/sbxfs-cli-test");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("the state directory is empty"), std::string::npos) << o.text;
}

TEST(DaemonCli, AFailedBackgroundStartSaysWhyOnce) {
  auto o = run_daemon("--state-dir /etc/passwd /nonexistent/sbxfs-cli-test");
  EXPECT_EQ(o.code, 1) << o.text;
  const std::string why = "sbxfs: cannot create state directory /etc/passwd";
  const std::size_t at = o.text.find(why);
  ASSERT_NE(at, std::string::npos) << o.text;
  EXPECT_EQ(o.text.find(why, at + 1), std::string::npos) << "said twice: " << o.text;
}

TEST(DaemonCli, AnOptionLibfuseDoesNotKnowIsNamedAsOurOwnErrorsAre) {
  auto o = run_daemon("-f -o no_such_option --state-dir /nonexistent/sbxfs-cli-state /nonexistent/sbxfs-cli-test");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_EQ(o.text.rfind("sbxfs: ", 0), 0u) << o.text;
  EXPECT_NE(o.text.find("unknown option(s): `-o no_such_option'"), std::string::npos) << o.text;
}

TEST(DaemonCli, ASecretsFileThatIsAFolderIsRefused) {
  // A folder would read as empty: nothing masked, and nothing said.
  auto o = run_daemon("-f --secrets-file /tmp --state-dir /nonexistent/sbxfs-cli-state /nonexistent/sbxfs-cli-test");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("cannot read secrets file /tmp: a folder"), std::string::npos) << o.text;
  // A character device is read like a file (here: no secrets); the start fails later, on its state directory.
  o = run_daemon("-f --secrets-file /dev/null --state-dir /etc/passwd /nonexistent/sbxfs-cli-test");
  EXPECT_EQ(o.text.find("secrets file"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("cannot create state directory /etc/passwd"), std::string::npos) << o.text;
}

TEST(DaemonCli, AStateDirectoryMadeByAFailedStartIsPrivate) {
  char tmpl[] = "/tmp/sbxfs-cli-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string state = std::string(tmpl) + "/state";
  // Refused after the state directory was made: the cgroup is no cgroup.
  auto o = run_daemon("-f -o cgroup=/nonexistent --state-dir " + state + " /nonexistent/sbxfs-cli-test");
  EXPECT_EQ(o.code, 1) << o.text;
  struct stat st {};
  ASSERT_EQ(::stat(state.c_str(), &st), 0) << o.text;
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  std::filesystem::remove_all(tmpl);
}
