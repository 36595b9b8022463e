// supervisor/cgroup: the layer on real cgroups, made only in a subtree of
// this test's own (found as the supervisor finds one) and removed after.
#include "supervisor/cgroup.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "supervisor/cgroup_limits.hpp"
#include "supervisor/monitor/monitor.hpp"
#include "supervisor/spec.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace std::chrono_literals;

class CgroupLayerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto h = sup::find_cgroup_hierarchy("", sup::cgroup_key("cgroup-layer-test-" + std::to_string(::getpid())), &why);
    if (!h) GTEST_SKIP() << "no writable cgroup v2 here: " << why;
    h_ = *h;
  }
  void TearDown() override {
    if (!cg_.empty()) {
      cg_.kill();
      cg_.wait_empty(5s);
      EXPECT_EQ(cg_.remove(), 0);
      EXPECT_FALSE(cg_.exists());
      EXPECT_TRUE(sup::Cgroup(h_.subtree).exists()) << "`live` holds the subtree while the supervisor runs";
    }
    sup::release_cgroup_hierarchy(h_);
    EXPECT_FALSE(sup::Cgroup(h_.subtree).exists()) << "the subtree goes with the supervisor, nothing left in it";
  }
  /// A child that joins cg_ (as the monitor's child does) and runs `sh -c script`.
  pid_t spawn_in(const std::string& script) {
    int procs = cg_.open_procs();
    EXPECT_GE(procs, 0);
    pid_t p = ::fork();
    if (p == 0) {
      if (::write(procs, "0", 1) != 1) ::_exit(126);
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(procs);
    return p;
  }
  sup::CgroupHierarchy h_;
  sup::Cgroup cg_;
};

TEST(CgroupHierarchyTest, OffAndAPathThatIsNoCgroupGiveNone) {
  std::string why;
  EXPECT_FALSE(sup::find_cgroup_hierarchy("off", "k", &why));
  EXPECT_NE(why.find("cgroup=off"), std::string::npos);
  EXPECT_FALSE(sup::find_cgroup_hierarchy("/tmp", "k", &why));
  EXPECT_NE(why.find("not a directory of a cgroup v2 filesystem"), std::string::npos) << why;
  EXPECT_EQ(sup::cgroup_key("/var/lib/sbxfs"), sup::cgroup_key("/var/lib/sbxfs"));
  EXPECT_NE(sup::cgroup_key("/var/lib/sbxfs"), sup::cgroup_key("/var/lib/sbxfs2"));
  EXPECT_EQ(sup::cgroup_key("x").size(), 16u);
}

// A delegated unit's cgroup enables controllers for its children only once
// no process is left in it: the daemon moves to a leaf, and so must the
// parent of a background start, which waits in the same cgroup for the mount.
TEST_F(CgroupLayerTest, TheDaemonsLeafTakesItsCompanionsAndToleratesOneGone) {
  const std::string unit = h_.base + "/unit-test-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(unit.c_str(), 0755), 0) << std::strerror(errno);
  const sup::Cgroup unit_cg(unit);
  std::vector<pid_t> members;
  for (int i = 0; i < 2; ++i) {
    const int procs = unit_cg.open_procs();
    ASSERT_GE(procs, 0);
    const pid_t p = ::fork();
    if (p == 0) {
      if (::write(procs, "0", 1) != 1) ::_exit(126);
      ::execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(procs);
    members.push_back(p);
  }
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  ASSERT_TRUE(sbxtest::wait_until([&] { return unit_cg.members().size() == 2; }, 10000ms, 10ms));

  EXPECT_EQ(sup::move_to_daemon_leaf(unit, {members[0], gone, members[1]}), 0);
  EXPECT_EQ(sup::read_cgroup_file(unit + "/cgroup.procs").value_or("?"), "") << "nobody left in the unit's own cgroup";
  std::vector<pid_t> in_leaf = sup::Cgroup(unit + "/daemon").members();
  std::sort(in_leaf.begin(), in_leaf.end());
  std::sort(members.begin(), members.end());
  EXPECT_EQ(in_leaf, members);
  // The first is the daemon itself: its failure is the answer.
  EXPECT_EQ(sup::move_to_daemon_leaf(unit, {gone}), ESRCH);

  for (const pid_t p : members) {
    ::kill(p, SIGKILL);
    ::waitpid(p, nullptr, 0);
  }
  ASSERT_TRUE(sbxtest::wait_until([&] { return !sup::Cgroup(unit + "/daemon").populated(); }, 10000ms, 10ms));
  EXPECT_EQ(::rmdir((unit + "/daemon").c_str()), 0);
  EXPECT_EQ(::rmdir(unit.c_str()), 0);
}

TEST_F(CgroupLayerTest, MembersAreKilledAndTheEmptyEventComes) {
  ASSERT_EQ(sup::create_command_cgroup(h_, "cmd-layer-1", &cg_), 0);
  EXPECT_TRUE(cg_.exists());
  EXPECT_FALSE(cg_.populated());
  // A shell with a setsid'd grandchild: both are members.
  pid_t p = spawn_in("setsid sleep 60 & exec sleep 60");
  ASSERT_TRUE(sbxtest::wait_until([&] { return cg_.members().size() >= 2; }, 10000ms, 10ms));
  EXPECT_TRUE(cg_.populated());
  EXPECT_EQ(cg_.members().size(), 2u);
  EXPECT_FALSE(cg_.wait_empty(50ms));
  EXPECT_EQ(cg_.kill(), 0);
  EXPECT_TRUE(cg_.wait_empty(5s)) << "populated 0 is an event";
  int st = 0;
  ASSERT_EQ(::waitpid(p, &st, 0), p);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

TEST_F(CgroupLayerTest, SignalsReachEveryMemberAndFreezeHoldsThem) {
  ASSERT_EQ(sup::create_command_cgroup(h_, "cmd-layer-2", &cg_), 0);
  pid_t p = spawn_in("exec sleep 60");
  ASSERT_TRUE(sbxtest::wait_until([&] { return !cg_.members().empty(); }, 10000ms, 10ms));
  EXPECT_EQ(cg_.freeze(true), 0);
  EXPECT_TRUE(cg_.frozen());
  EXPECT_EQ(cg_.freeze(false), 0);
  EXPECT_FALSE(cg_.frozen());
  EXPECT_EQ(cg_.signal_members(SIGTERM), 1u);
  int st = 0;
  ASSERT_EQ(::waitpid(p, &st, 0), p);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  EXPECT_TRUE(cg_.wait_empty(5s));
  EXPECT_TRUE(cg_.cpu_usec().has_value()) << "cpu.stat exists without the cpu controller";
}

// The monitor signals its own child (the command's first process) by pid,
// the others through checked pidfds: each gets the signal once.
TEST_F(CgroupLayerTest, TheCallersOwnChildAndTheOtherMembersAreSignalled) {
  ASSERT_EQ(sup::create_command_cgroup(h_, "cmd-layer-own", &cg_), 0);
  pid_t p = spawn_in("sleep 60 & exec sleep 61");
  ASSERT_TRUE(sbxtest::wait_until([&] { return cg_.members().size() >= 2; }, 10000ms, 10ms));
  EXPECT_EQ(cg_.signal_members(SIGTERM, true, p), 2u);
  int st = 0;
  ASSERT_EQ(::waitpid(p, &st, 0), p);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
  EXPECT_TRUE(cg_.wait_empty(5s)) << "the member that is not the caller's child had its TERM too";
  // Only the caller's child: signalled with no pidfd and no second look.
  pid_t q = spawn_in("exec sleep 62");
  ASSERT_TRUE(sbxtest::wait_until([&] { return cg_.members().size() == 1; }, 10000ms, 10ms));
  EXPECT_EQ(cg_.signal_members(SIGTERM, false, q), 1u);
  ASSERT_EQ(::waitpid(q, &st, 0), q);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
}

// The monitor's way to start a command's process (supervisor/monitor/shared_clone.cpp):
// it shares the caller's memory until it ends, and its first instruction already runs
// in the cgroup whose directory it is given.
struct FirstLook {
  int out;  // the pipe the child writes its /proc/self/cgroup to
};

int report_cgroup(void* arg) {
  const int out = static_cast<FirstLook*>(arg)->out;
  char buf[1024];
  const int fd = ::open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
  const ssize_t n = fd < 0 ? -1 : ::read(fd, buf, sizeof buf);
  if (n > 0 && ::write(out, buf, static_cast<size_t>(n)) != n) ::_exit(2);
  ::_exit(n > 0 ? 0 : 1);
}

TEST_F(CgroupLayerTest, ACommandsProcessIsBornInItsCgroup) {
  ASSERT_EQ(sup::create_command_cgroup(h_, "cmd-layer-born", &cg_), 0);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  const int dir = cg_.open_dir();
  ASSERT_GE(dir, 0);
  FirstLook look{p[1]};
  const pid_t child = sbxmon::clone_sharing_memory(report_cgroup, &look, dir);
  const int e = errno;
  ::close(dir);
  ::close(p[1]);
  ASSERT_GT(child, 0) << std::strerror(e);
  std::string seen;
  char buf[1024];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) seen.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = 0;
  ASSERT_EQ(::waitpid(child, &st, 0), child);
  sbxmon::release_child_stack();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  // cgroup v2's line is "0::PATH", PATH from the hierarchy's mount point.
  const std::size_t at = seen.find("0::");
  ASSERT_NE(at, std::string::npos) << seen;
  const std::string rel = seen.substr(at + 3, seen.find('\n', at) - at - 3);
  const std::string& full = cg_.path();
  const bool ends_with_rel = full.size() > rel.size() && full.compare(full.size() - rel.size(), rel.size(), rel) == 0;
  EXPECT_TRUE(rel.size() > 1 && ends_with_rel) << "the child's first look says " << rel << ", its cgroup is " << full;
}

TEST_F(CgroupLayerTest, ADirectoryThatIsNoCgroupMakesNoProcess) {
  char tmp[] = "/tmp/sbx-not-a-cgroup-XXXXXX";
  ASSERT_NE(::mkdtemp(tmp), nullptr);
  const int dir = ::open(tmp, O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir, 0);
  FirstLook look{-1};
  const pid_t child = sbxmon::clone_sharing_memory(report_cgroup, &look, dir);
  const int e = errno;
  ::close(dir);
  ::rmdir(tmp);
  EXPECT_EQ(child, -1) << "the caller then joins by cgroup.procs, which says what is wrong";
  EXPECT_NE(e, 0);
}

TEST_F(CgroupLayerTest, ALeftoverOfTheSameNameIsReplacedWhenEmpty) {
  ASSERT_EQ(sup::create_command_cgroup(h_, "cmd-layer-3", &cg_), 0);
  sup::Cgroup again;
  EXPECT_EQ(sup::create_command_cgroup(h_, "cmd-layer-3", &again), 0);
  EXPECT_EQ(again.path(), cg_.path());
}

TEST_F(CgroupLayerTest, LimitsNameTheControllerThatIsMissing) {
  sup::Limits l;
  l.pids_max = 5;
  EXPECT_NE(sup::limits_refused(l, nullptr, "turned off").value_or("").find("turned off"), std::string::npos);
  sup::CgroupHierarchy none = h_;
  none.controllers.clear();
  EXPECT_NE(sup::limits_refused(l, &none, "").value_or("").find("the pids controller"), std::string::npos);
  sup::CgroupHierarchy all = h_;
  all.controllers = {"memory", "cpu", "pids"};
  EXPECT_FALSE(sup::limits_refused(l, &all, ""));
  EXPECT_FALSE(sup::limits_refused(sup::Limits{}, nullptr, ""));
}

TEST(LimitsSpecTest, ParsedAndKeptInTheSpec) {
  auto r = sup::parse_request(R"({"cmd": "true", "limits": {"memoryMax": 1048576, "cpuMax": 50, "pidsMax": 10}})", "/");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r.value().limits);
  EXPECT_EQ(*r.value().limits->memory_max, 1048576u);
  EXPECT_EQ(*r.value().limits->cpu_max, 50);
  EXPECT_EQ(*r.value().limits->pids_max, 10u);
  auto back = sup::spec_from_json(sup::spec_to_json(r.value()));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back.value().limits->pids_max, 10u);
  for (const char* bad : {R"({"cmd": "true", "limits": {"pidsMax": 0}})", R"({"cmd": "true", "limits": {"x": 1}})",
                          R"({"cmd": "true", "limits": {"memoryMax": -5}})", R"({"cmd": "true", "limits": {"cpuMax": 0}})",
                          R"({"cmd": "true", "limits": []})"}) {
    auto b = sup::parse_request(bad, "/");
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.error().code, sup::Errc::invalid_argument) << bad;
  }
}

}  // namespace

// The loader finds a command's cgroup by its id (a torn monitor.json) and
// sweeps those no record owns: the id comes back from the name, dashes and all.
TEST(CommandCgroupNameTest, TheIdComesBackFromTheName) {
  EXPECT_EQ(sup::command_cgroup_name("0001", 17), "cmd-0001-17");
  EXPECT_EQ(sup::command_cgroup_id(sup::command_cgroup_name("0001", 17)), "0001");
  EXPECT_EQ(sup::command_cgroup_id(sup::command_cgroup_name("job-1.a_B", 5)), "job-1.a_B");
  for (const char* other : {"live", "cmd-", "cmd-5", "cmd--1", "sbxfs-abc", ""})
    EXPECT_EQ(sup::command_cgroup_id(other), std::nullopt) << other;
}
