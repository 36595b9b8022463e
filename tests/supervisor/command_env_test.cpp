// The environment a command starts with: the supervisor's for its own
// user; for another user (allow_other), that user's login variables and
// only PATH, TZ and the locale of the supervisor's.
#include <pwd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "supervisor/command_env.hpp"

namespace {

std::vector<char*> base_env(std::vector<std::string>& store) {
  store = {"PATH=/opt/p:/usr/bin", "HOME=/root", "AWS_SECRET_ACCESS_KEY=root-only", "LANG=C.UTF-8",
           "LC_TIME=de_DE.UTF-8", "TZ=Europe/Berlin", "USER=root", "NOEQUALS"};
  std::vector<char*> p;
  for (std::string& s : store) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

TEST(CommandEnv, TheSupervisorsUserGetsItsWholeEnvironment) {
  std::vector<std::string> store;
  std::vector<char*> base = base_env(store);
  sup::StartSpec spec;
  spec.env = {{"A", "1"}, {"HOME", "/elsewhere"}};
  spec.secret_env = {{"TOKEN", "t"}};
  const auto env = sup::command_env(spec, base.data());
  EXPECT_EQ(env.at("AWS_SECRET_ACCESS_KEY"), "root-only");
  EXPECT_EQ(env.at("HOME"), "/elsewhere") << "the request's env over it";
  EXPECT_EQ(env.at("A"), "1");
  EXPECT_EQ(env.at("TOKEN"), "t");
  EXPECT_EQ(env.count("NOEQUALS"), 0u);
  // run_as naming the supervisor's own user is that user too.
  spec.run_as = sup::Credentials{::geteuid(), ::getegid(), {}};
  EXPECT_EQ(sup::command_env(spec, base.data()).at("AWS_SECRET_ACCESS_KEY"), "root-only");
}

TEST(CommandEnv, AnotherUserGetsItsOwnLoginVariablesAndNoneOfTheSupervisorsSecrets) {
  if (::geteuid() == 65534) GTEST_SKIP() << "runs as nobody itself";
  const struct passwd* nobody = ::getpwuid(65534);
  ASSERT_NE(nobody, nullptr) << "no user 65534 in the password database";
  std::vector<std::string> store;
  std::vector<char*> base = base_env(store);
  sup::StartSpec spec;
  spec.run_as = sup::Credentials{65534, 65534, {}};
  spec.env = {{"A", "1"}};
  auto env = sup::command_env(spec, base.data());
  EXPECT_EQ(env.count("AWS_SECRET_ACCESS_KEY"), 0u);
  EXPECT_EQ(env.at("HOME"), nobody->pw_dir);
  EXPECT_EQ(env.at("USER"), nobody->pw_name);
  EXPECT_EQ(env.at("LOGNAME"), nobody->pw_name);
  EXPECT_EQ(env.at("SHELL"), nobody->pw_shell);
  EXPECT_EQ(env.at("PATH"), "/opt/p:/usr/bin");
  EXPECT_EQ(env.at("LANG"), "C.UTF-8");
  EXPECT_EQ(env.at("LC_TIME"), "de_DE.UTF-8");
  EXPECT_EQ(env.at("TZ"), "Europe/Berlin");
  EXPECT_EQ(env.at("A"), "1");
  EXPECT_EQ(env.size(), 9u);
  // A uid the database does not know: a home that needs none.
  spec.run_as = sup::Credentials{54321, 54321, {}};
  ASSERT_EQ(::getpwuid(54321), nullptr);
  env = sup::command_env(spec, base.data());
  EXPECT_EQ(env.at("HOME"), "/");
  EXPECT_EQ(env.at("USER"), "54321");
}

}  // namespace
