// The daemon's command line, without a mount.
#include <sys/wait.h>

#include <cstdio>
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
  EXPECT_NE(o.text.find("keep_ended_sec must be at most 100 years"), std::string::npos) << o.text;
}
