// supervisor/start_folder: a start writes into the files of the spare folder
// it took, made ahead, instead of creating them on its path.
#include "supervisor/start_folder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "supervisor/exit_record.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sbxtest;

using StartFolderTest = SupervisorTest;

ino_t inode_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST(StartFolder, HoldsTheFilesAStartWrites) {
  char tmp[] = "/tmp/sbx-start-folder-XXXXXX";
  ASSERT_NE(::mkdtemp(tmp), nullptr);
  const std::string dir = tmp;
  const int dirfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dirfd, 0);
  EXPECT_EQ(sup::prepare_start_folder(dirfd), 0);
  EXPECT_EQ(sup::prepare_start_folder(dirfd), EEXIST) << "only into an empty folder";
  ::close(dirfd);
  struct stat st {};
  ASSERT_EQ(::lstat((dir + "/ctl").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::lstat((dir + "/exit.json.tmp").c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), sup::kExitFileReserve);
  for (const char* name : {"spec.json.tmp", "monitor.json.tmp"}) {
    ASSERT_EQ(::lstat((dir + "/" + name).c_str(), &st), 0) << name;
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_size, 0);
  }
  fs::remove_all(dir);
}

TEST_F(StartFolderTest, AStartWritesIntoTheFilesOfTheSpareItTook) {
  // The spares are made on the work pool a little after the supervisor
  // opened, one after another, each handed out once it is whole. With all
  // of them whole on disk no more are made, and the one a start takes (the
  // last handed out) is among them.
  std::map<std::string, std::set<ino_t>> made;  // file name in a spare: the inodes of all whole spares' ones
  ASSERT_TRUE(wait_until(
      [&] {
        made.clear();
        const std::vector<std::string> whole = whole_spares();
        for (const std::string& spare : whole)
          for (const char* name : {"spec.json.tmp", "monitor.json.tmp", "ctl", "exit.json.tmp"})
            made[name].insert(inode_of(spare + "/" + name));
        return whole.size() >= sup::kStartFolderSpares;
      },
      5000ms));

  auto r = sup_->start(argv({"sleep", "30"}));
  SBX_ASSERT_OK(r);
  const std::string rec = record_dir(r->bg_id);
  EXPECT_TRUE(made["spec.json.tmp"].count(inode_of(rec + "/spec.json"))) << "spec.json was created anew";
  EXPECT_TRUE(made["monitor.json.tmp"].count(inode_of(rec + "/monitor.json"))) << "monitor.json was created anew";
  EXPECT_TRUE(made["ctl"].count(inode_of(rec + "/ctl"))) << "ctl was made anew";
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  auto st = wait_ended(r->bg_id, 10000ms);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->end_reason, "stopped");
  EXPECT_TRUE(made["exit.json.tmp"].count(inode_of(rec + "/exit.json"))) << "exit.json was written elsewhere";
  for (const std::string& name : dir_entries(rec))
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name << " is left in the ended record";
}

TEST_F(StartFolderTest, ANamedSlotsFolderHoldsItsSlotFileOnly) {
  ASSERT_TRUE(wait_until([&] { return !dir_entries(state_dir() + "/staging").empty(); }, 5000ms));
  SBX_ASSERT_OK(sup_->create_slot("slot", ::getuid(), 0));
  const std::set<std::string> names = dir_entries(record_dir("slot"));
  EXPECT_EQ(names.size(), 1u) << "files of a start in a slot's folder";
}

}  // namespace
