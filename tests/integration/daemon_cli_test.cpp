// The daemon's command line, without a mount.
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace {

struct Out {
  int code = -1;
  std::string text;
};

Out run_daemon(const std::string& args) {
  Out o;
  std::string cmd = "timeout 10 '" SBXFS_PATH "' " + args + " 2>&1";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) return o;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) o.text.append(buf, n);
  int st = ::pclose(f);
  o.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return o;
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
