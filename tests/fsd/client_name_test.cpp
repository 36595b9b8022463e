// SBX_CLIENT as read from a real process's environment (/proc/PID/environ).
#include <gtest/gtest.h>

#include <csignal>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "fsd/client_name.hpp"

namespace {

/// A sleeping child started with exactly `env`; killed and reaped at the end.
class Child {
 public:
  explicit Child(std::vector<std::string> env) : env_(std::move(env)) {
    std::vector<char*> envp;
    for (std::string& e : env_) envp.push_back(e.data());
    envp.push_back(nullptr);
    char arg0[] = "sleep", arg1[] = "30";
    char* argv[] = {arg0, arg1, nullptr};
    EXPECT_EQ(posix_spawn(&pid_, "/bin/sleep", nullptr, nullptr, argv, envp.data()), 0);
    // posix_spawn may return before the exec has set the new environment
    // up: until then /proc shows the parent's, or nothing.
    std::string want;
    for (const std::string& e : env_) want += e + '\0';
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (environ_text() != want && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  }
  ~Child() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  std::string environ_text() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/environ");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::vector<std::string> env_;
  pid_t pid_ = 0;
};

TEST(ClientName, TheFirstSbxClientOfTheEnvironment) {
  Child c({"A=1", "SBX_CLIENT=agent-7", "SBX_CLIENT=other"});
  EXPECT_EQ(fsd::client_of(c.pid()), "agent-7");
}

TEST(ClientName, NoneEmptyOrNotText) {
  EXPECT_EQ(fsd::client_of(Child({"A=1"}).pid()), "");
  EXPECT_EQ(fsd::client_of(Child({"SBX_CLIENT="}).pid()), "");
  EXPECT_EQ(fsd::client_of(Child({"SBX_CLIENT=a\xff" "b"}).pid()), "");
  EXPECT_EQ(fsd::client_of(0), "");
  EXPECT_EQ(fsd::client_of(-1), "");
}

TEST(ClientName, ALongNameIsCutAtACharactersStart) {
  std::string name;
  for (int i = 0; i < 200; ++i) name += "\xc3\xa9";  // é: 400 bytes
  Child c({"SBX_CLIENT=x" + name});  // 401 bytes: the cut falls inside a character
  const std::string got = fsd::client_of(c.pid());
  EXPECT_EQ(got.size(), fsd::kMaxClientName - 1);
  EXPECT_EQ(got, ("x" + name).substr(0, fsd::kMaxClientName - 1));
}

}  // namespace
