// supervisor/state_dir_place: a state directory is never inside another's
// own entries, at any depth or through a symlink, nor holds one in its own.
#include "supervisor/state_dir_place.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/supervisor/test_util.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sbxtest;

/// Makes `dir` look like a state directory: its lock and its procs/.
void make_state_dir(const fs::path& dir) {
  fs::create_directories(dir / "procs");
  std::ofstream(dir / "lock") << "1\n";
}

TEST(StateDirPlace, InsideAnothersOwnEntriesAtAnyDepthIsRefused) {
  TempDir t("sbx-place");
  const fs::path outer = t.path();
  make_state_dir(outer);
  EXPECT_EQ(sup::state_dir_misplaced(t / "staging"),
            "state directory " + (t / "staging") + " is inside the staging of the state directory " + t.path());
  EXPECT_NE(sup::state_dir_misplaced(t / "procs/"), "");
  EXPECT_NE(sup::state_dir_misplaced(t / "staging/a/b"), "") << "two levels below";
  EXPECT_NE(sup::state_dir_misplaced(t / "steps/x"), "");
  // Through a symlink that points into it.
  fs::create_directories(outer / "scripts");
  fs::create_directory_symlink(outer / "scripts", outer / "elsewhere");
  EXPECT_NE(sup::state_dir_misplaced(t / "elsewhere/x"), "");
  // Beside its own entries is fine: sbxfs@X in /var/lib/sbxfs/X.
  EXPECT_EQ(sup::state_dir_misplaced(t / "srv-sbx"), "");
  EXPECT_EQ(sup::state_dir_misplaced(t.path()), "");
}

TEST(StateDirPlace, AStrayLockFileIsNoStateDirectory) {
  TempDir t("sbx-place");
  std::ofstream(t / "lock") << "x\n";  // no procs/ beside it
  EXPECT_EQ(sup::state_dir_misplaced(t / "steps"), "");
  // A record named lock is a folder.
  TempDir u("sbx-place");
  fs::create_directories(fs::path(u.path()) / "procs/lock");
  EXPECT_EQ(sup::state_dir_misplaced(u.path()), "");
}

TEST(StateDirPlace, HoldingAnotherInItsOwnEntriesIsRefused) {
  TempDir t("sbx-place");
  make_state_dir(fs::path(t.path()) / "staging");
  EXPECT_EQ(sup::state_dir_misplaced(t.path()),
            "state directory " + t.path() + " holds another state directory in its staging");
  TempDir u("sbx-place");
  make_state_dir(fs::path(u.path()) / "procs/inner");
  EXPECT_NE(sup::state_dir_misplaced(u.path()), "") << "one level below";
}

}  // namespace
