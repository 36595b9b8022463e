// The one /proc module: stat fields, and descendants found from every
// process's parent (also a grandchild in a session of its own).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "supervisor/proc_tree.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

TEST(ProcTree, ReadsItsOwnStat) {
  sup::ProcStat st;
  ASSERT_TRUE(sup::read_proc_stat(::getpid(), &st));
  EXPECT_EQ(st.ppid, ::getppid());
  EXPECT_EQ(st.pgrp, ::getpgrp());
  EXPECT_EQ(st.session, ::getsid(0));
  EXPECT_EQ(st.state, 'R');
  EXPECT_GT(st.starttime, 0u);
  EXPECT_EQ(sup::process_start_time(::getpid()), st.starttime);
  EXPECT_FALSE(sup::process_is_zombie(::getpid()));
  EXPECT_FALSE(sup::read_proc_stat(0x7ffffff0, &st));
  EXPECT_EQ(sup::process_start_time(0x7ffffff0), std::nullopt);
}

TEST(ProcTree, AZombieIsSeenAsOne) {
  const pid_t p = ::fork();
  ASSERT_GE(p, 0);
  if (p == 0) ::_exit(0);
  EXPECT_TRUE(wait_until([&] { return sup::process_is_zombie(p); }, 5000ms));
  ::waitpid(p, nullptr, 0);
}

TEST(ProcTree, DescendantsIncludeGrandchildrenInTheirOwnSession) {
  // sh -> sleep, and sh -> setsid sleep: both below the child.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl("/bin/sh", "sh", "-c", "sleep 30 & setsid sleep 30 & wait", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::vector<pid_t> d;
  EXPECT_TRUE(wait_until([&] { return (d = sup::descendants(child)).size() >= 2; }, 5000ms))
      << pids_to_string(d);
  for (pid_t p : d) {
    sup::ProcStat st;
    ASSERT_TRUE(sup::read_proc_stat(p, &st));
    EXPECT_EQ(st.ppid, child);
  }
  // Our own descendants hold the child first (parents before children).
  const auto all = sup::scan_processes();
  const auto mine = sup::descendants_in(all, ::getpid());
  ASSERT_FALSE(mine.empty());
  auto at = [&](pid_t p) {
    return std::find_if(mine.begin(), mine.end(), [p](const sup::ProcEntry& e) { return e.pid == p; }) - mine.begin();
  };
  ASSERT_LT(at(child), static_cast<long>(mine.size()));
  for (pid_t p : d) EXPECT_LT(at(child), at(p));
  ::kill(child, SIGKILL);
  for (pid_t p : d) ::kill(p, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(ProcTree, OomCounterIsReadWhereTheKernelHasIt) {
  // /proc/vmstat has oom_kill on every kernel this runs on (4.13 and later),
  // far past the first few hundred bytes that the reader's buffer holds.
  std::ifstream in("/proc/vmstat");
  std::string key;
  long long value = -1, expected = -1;
  std::size_t offset = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") {
      expected = value;
      break;
    }
    offset += key.size() + 1 + std::to_string(value).size() + 1;
  }
  ASSERT_GE(expected, 0) << "no oom_kill line in /proc/vmstat";
  EXPECT_GT(offset, 256u) << "the line is within the reader's first buffer: the test shows less than it should";
  // The counters before the line go on changing between this read and the
  // reader's: a width that changes meanwhile (9999 to 10000 free pages)
  // moves the line by a byte or two, as it does for the reader's next look.
  const auto near = [&](std::size_t at) { return at + 32 > offset && at < offset + 32; };
  EXPECT_EQ(sup::read_oom_kill_count(), expected);  // no OOM kill on a machine running tests, as a rule
  EXPECT_TRUE(near(sup::oom_kill_line_offset())) << sup::oom_kill_line_offset() << " against " << offset;
  // Again, from a window around the line: the same count, about the same place.
  EXPECT_EQ(sup::read_oom_kill_count(), expected);
  EXPECT_TRUE(near(sup::oom_kill_line_offset())) << sup::oom_kill_line_offset() << " against " << offset;
}

}  // namespace
