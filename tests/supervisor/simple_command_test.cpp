// Which shell text is one simple command of plain words, and the environment
// dash gives the command it runs: checked against /bin/sh itself.
#include "supervisor/simple_command.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using sup::simple_command_env;
using sup::simple_command_words;
using Words = std::vector<std::string>;

TEST(SimpleCommandTest, PlainWordsSplitAtBlanks) {
  EXPECT_EQ(simple_command_words("sleep 30"), (Words{"sleep", "30"}));
  EXPECT_EQ(simple_command_words("  npm\trun  dev "), (Words{"npm", "run", "dev"}));
  EXPECT_EQ(simple_command_words("make -j4 CC=gcc --opt=a,b:c+d@e%f"),
            (Words{"make", "-j4", "CC=gcc", "--opt=a,b:c+d@e%f"}));
  EXPECT_EQ(simple_command_words("./run.sh /tmp/x_y"), (Words{"./run.sh", "/tmp/x_y"}));
  EXPECT_EQ(simple_command_words("grep caf\xc3\xa9"), (Words{"grep", "caf\xc3\xa9"}));
}

TEST(SimpleCommandTest, AnythingTheShellReadsIsLeftToIt) {
  for (const char* text : {"echo $HOME", "ls *.c", "a; b", "a && b", "a | b", "a > f", "a < f", "a &", "(a)",
                           "a 'b c'", "a \"b\"", "a\\ b", "a `b`", "a # c", "cd ~", "a\nb", "a?", "a [x]",
                           "{ a; }", "a !b", "x{a,b}", "", "   ", "\t"})
    EXPECT_EQ(simple_command_words(text), std::nullopt) << text;
}

TEST(SimpleCommandTest, BuiltInsReservedWordsAndAssignmentsAreLeftToTheShell) {
  for (const char* text : {"echo -e a", "true", "false", "test -f x", "[ -f x ]", "kill -9 1", "printf x",
                           "pwd", "cd /tmp", "exit 3", "exec sleep 1", "wait", "read x", ". ./env",
                           ": nothing", "if", "for", "while", "! a", "FOO=1 env", "umask", "ulimit -n",
                           "-prog x", "+prog x"})
    EXPECT_EQ(simple_command_words(text), std::nullopt) << text;
  EXPECT_EQ(simple_command_words("env FOO=1"), (Words{"env", "FOO=1"})) << "an assignment after the program is an argument";
  EXPECT_EQ(simple_command_words("/bin/echo -e a"), (Words{"/bin/echo", "-e", "a"})) << "a path is no built-in";
}

bool never_this_dir(const char*) { return false; }
bool always_this_dir(const char*) { return true; }

// The environment as a sorted list of entries, PWD chosen as dash does
// (`same_dir` says whether the given PWD names the working directory `cwd`).
std::optional<Words> env_of(const std::vector<std::string_view>& env, const std::string& cwd,
                            bool (*same_dir)(const char*)) {
  std::optional<sup::SimpleEnv> e = simple_command_env(env);
  if (!e) return std::nullopt;
  Words out;
  for (std::size_t i : e->kept) out.emplace_back(env[i]);
  out.push_back("PWD=" + (e->pwd && same_dir(e->pwd->c_str()) ? *e->pwd : cwd));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(SimpleCommandTest, EnvironmentIsTheShells) {
  std::vector<std::string_view> env = {"PATH=/bin", "A=1", "A-B=2", "x.y=3", "noequals", "_=z", "PWD=/else"};
  EXPECT_EQ(env_of(env, "/work", never_this_dir), (Words{"A=1", "PATH=/bin", "PWD=/work", "_=z"}));
  EXPECT_EQ(env_of(env, "/work", always_this_dir), (Words{"A=1", "PATH=/bin", "PWD=/else", "_=z"}))
      << "a PWD that names the folder is kept";
  EXPECT_EQ(env_of({"PATH=/bin", "PWD=relative"}, "/work", always_this_dir), (Words{"PATH=/bin", "PWD=/work"}))
      << "only an absolute PWD is kept";
  EXPECT_FALSE(simple_command_env({"A=1"})) << "no PATH";
  EXPECT_FALSE(simple_command_env({"PATH="})) << "an empty PATH";
  EXPECT_FALSE(simple_command_env({"PATH=/opt/x%builtin:/bin"})) << "dash reads % in PATH as its own";
  for (const char* reset : {"IFS=x", "OPTIND=3", "PPID=1"})
    EXPECT_FALSE(simple_command_env({"PATH=/bin", reset})) << reset;
}

// What /bin/sh -c /usr/bin/env prints, run in `dir` with `env`: the
// environment dash gives a command.
std::vector<std::string> shell_env(const std::vector<std::string>& env, const std::string& dir) {
  int p[2];
  if (::pipe(p) != 0) return {};
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    const char* argv[] = {"/bin/sh", "-c", "/usr/bin/env", nullptr};
    ::execve("/bin/sh", const_cast<char**>(argv), envp.data());
    ::_exit(127);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  std::vector<std::string> lines;
  for (std::size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(out.substr(at, nl - at));
  std::sort(lines.begin(), lines.end());
  return lines;
}

// Each environment as dash leaves it, from a folder reached through a
// symbolic link (dash keeps a PWD that names the folder, else takes getcwd).
TEST(SimpleCommandTest, EnvironmentMatchesWhatDashGivesItsCommand) {
  char tmpl[] = "/tmp/sbx-simple-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string top = tmpl;
  ASSERT_EQ(::mkdir((top + "/real").c_str(), 0700), 0);
  ASSERT_EQ(::symlink((top + "/real").c_str(), (top + "/link").c_str()), 0);
  char* real = ::realpath((top + "/real").c_str(), nullptr);
  ASSERT_NE(real, nullptr);
  const std::string cwd = real;
  std::free(real);
  const std::string link = top + "/link";
  static std::string here;
  here = link;
  const std::vector<std::vector<std::string>> cases = {
      {"PATH=/usr/bin:/bin", "HOME=/root", "A-B=1", "x.y=2", "_=z", "SHLVL=3", "PS1=p"},
      {"PATH=/usr/bin:/bin", "PWD=" + link},
      {"PATH=/usr/bin:/bin", "PWD=/"},
      {"PATH=/usr/bin:/bin", "PWD=" + top + "/real/../real", "LINENO=4", "ENV=/nonexistent"},
  };
  for (const std::vector<std::string>& env : cases) {
    std::vector<std::string_view> views(env.begin(), env.end());
    auto mine = env_of(views, cwd, [](const char* p) {
      struct stat a, b;
      return ::stat(p, &a) == 0 && ::stat(here.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    });
    ASSERT_TRUE(mine) << env[1];
    EXPECT_EQ(*mine, shell_env(env, link)) << env[1];
  }
  ::unlink(link.c_str());
  ::rmdir((top + "/real").c_str());
  ::rmdir(top.c_str());
}

}  // namespace
