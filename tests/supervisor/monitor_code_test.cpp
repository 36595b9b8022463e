// A new monitor has its program's read-only pages (code, constants) and
// the vDSO mapped from its start: the server maps them with one call a
// range instead of a page fault at each page's first use (server.cpp).
#include <sys/mman.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

using MonitorCodeTest = SupervisorTest;

/// One mapping of /proc/PID/smaps: its first line, its size and how much of it is mapped (kB).
struct Mapping {
  std::string line, perms, path;
  long size_kb = -1;
  long rss_kb = -1;
};

std::vector<Mapping> mappings_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  std::vector<Mapping> all;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string first;
    f >> first;
    if (first.find('-') != std::string::npos) {  // a mapping's first line: range, perms, offset, dev, inode, path
      Mapping m;
      m.line = line;
      std::string offset, dev, inode;
      f >> m.perms >> offset >> dev >> inode >> m.path;
      all.push_back(m);
    } else if (!all.empty() && first == "Size:") {
      f >> all.back().size_kb;
    } else if (!all.empty() && first == "Rss:") {
      f >> all.back().rss_kb;
    }
  }
  return all;
}

TEST_F(MonitorCodeTest, ANewMonitorHasItsReadOnlyPagesMapped) {
  {
    // MADV_POPULATE_READ came with Linux 5.14; before, the monitor faults its pages in as it runs.
    void* page = ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(page, MAP_FAILED);
    const int rc = ::madvise(page, 4096, MADV_POPULATE_READ);
    ::munmap(page, 4096);
    if (rc != 0) GTEST_SKIP() << "no MADV_POPULATE_READ in this kernel";
  }
  auto r = sup_->start(argv({"sleep", "30"}));
  SBX_ASSERT_OK(r);
  auto mon = read_json(record_dir(r->bg_id) + "/monitor.json");
  ASSERT_TRUE(mon);
  int code = 0, vdso = 0;
  for (const Mapping& m : mappings_of(mon->at("monitorPid").get<pid_t>())) {
    const bool program = m.path.find("sbxfs-monitor") != std::string::npos;
    if (!(program && m.perms.find('w') == std::string::npos) && m.path != "[vdso]") continue;
    (m.path == "[vdso]" ? vdso : code) += m.perms == "r-xp";
    EXPECT_EQ(m.rss_kb, m.size_kb) << "mapped only where the monitor used it: " << m.line;
  }
  EXPECT_EQ(code, 1) << "no code mapping of sbxfs-monitor found";
  EXPECT_EQ(vdso, 1) << "no vDSO mapping found";
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  EXPECT_TRUE(wait_ended(r->bg_id, 10000ms));
}

}  // namespace
