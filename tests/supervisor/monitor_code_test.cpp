// A new monitor has all of its program's code mapped from its start (the
// server's map_code(): one call, not a page fault per part of the code).
#include <sys/mman.h>

#include <fstream>
#include <sstream>

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

using MonitorCodeTest = SupervisorTest;

/// kB of the monitor's code mapping: its size and how much of it is mapped.
struct CodeMapping {
  long size_kb = -1;
  long rss_kb = -1;
};

CodeMapping code_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps");
  CodeMapping m;
  bool in_code = false;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string first;
    f >> first;
    if (first.find('-') != std::string::npos) {  // a mapping's first line: range, perms, ..., path
      if (in_code) break;                      // the code's fields are read
      std::string perms;
      f >> perms;
      in_code = perms == "r-xp" && line.find("sbxfs-monitor") != std::string::npos;
    } else if (in_code && first == "Size:") {
      f >> m.size_kb;
    } else if (in_code && first == "Rss:") {
      f >> m.rss_kb;
    }
  }
  return m;
}

TEST_F(MonitorCodeTest, ANewMonitorHasAllItsCodeMapped) {
  {
    // MADV_POPULATE_READ came with Linux 5.14; before, the monitor faults its code in as it runs.
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
  const CodeMapping code = code_of(mon->at("monitorPid").get<pid_t>());
  ASSERT_GT(code.size_kb, 0) << "no code mapping of sbxfs-monitor found";
  EXPECT_EQ(code.rss_kb, code.size_kb) << "the monitor's code is mapped only where it ran";
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  EXPECT_TRUE(wait_ended(r->bg_id, 10000ms));
}

}  // namespace
