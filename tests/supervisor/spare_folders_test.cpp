// supervisor/spare_folders: folders made ahead, renamed into place.
#include "supervisor/spare_folders.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;
using sup::SpareFolders;

class SpareFoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmp[] = "/tmp/sbx-spares-XXXXXX";
    ASSERT_NE(::mkdtemp(tmp), nullptr);
    dir_ = tmp;
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// The tasks handed to `later`, run when the test says.
  SpareFolders::Later keep_tasks() {
    return [this](std::function<void()> t) { tasks_.push_back(std::move(t)); };
  }
  void run_tasks() {
    auto due = std::move(tasks_);
    tasks_.clear();
    for (auto& t : due) t();
  }
  /// Asks for spares and makes them now.
  void refill(SpareFolders& sf) {
    sf.refill_later();
    run_tasks();
  }
  std::vector<std::string> spares_on_disk() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().rfind("spare-", 0) == 0) out.push_back(e.path().string());
    return out;
  }
  static unsigned mode_of(const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
  }

  std::string dir_;
  std::vector<std::function<void()>> tasks_;
};

TEST_F(SpareFoldersTest, AFolderComesFromASpareWhichIsMadeAgainLater) {
  SpareFolders sf(dir_, 3, keep_tasks());
  EXPECT_EQ(sf.ready(), 0u) << "none made before asked";
  sf.refill_later();
  sf.refill_later();
  ASSERT_EQ(tasks_.size(), 1u) << "asked once until it has run";
  run_tasks();
  EXPECT_EQ(sf.ready(), 3u);
  EXPECT_EQ(spares_on_disk().size(), 3u);

  const std::string a = dir_ + "/new-a~1";
  ASSERT_EQ(sf.make(a), 0);
  EXPECT_TRUE(fs::is_directory(a));
  EXPECT_TRUE(fs::is_empty(a));
  EXPECT_EQ(mode_of(a), 0700u);
  EXPECT_EQ(sf.ready(), 2u);
  EXPECT_EQ(spares_on_disk().size(), 2u) << "renamed, not made";
  EXPECT_TRUE(tasks_.empty()) << "make() leaves the refill to its caller";

  refill(sf);
  EXPECT_EQ(sf.ready(), 3u);
  EXPECT_EQ(spares_on_disk().size(), 3u);
}

TEST_F(SpareFoldersTest, WithoutASpareTheFolderIsMadeAsBefore) {
  SpareFolders sf(dir_, 2, keep_tasks());
  const std::string a = dir_ + "/new-a~1";
  ASSERT_EQ(sf.make(a), 0);
  EXPECT_TRUE(fs::is_directory(a));
  EXPECT_EQ(mode_of(a), 0700u);
  EXPECT_EQ(sf.make(dir_ + "/no/such/parent"), ENOENT);
}

TEST_F(SpareFoldersTest, AnExistingFolderIsRefusedAsMkdirWouldAndTheSpareIsNotLost) {
  SpareFolders sf(dir_, 1, keep_tasks());
  refill(sf);
  const std::string a = dir_ + "/new-a~1";
  ASSERT_EQ(::mkdir(a.c_str(), 0700), 0);
  EXPECT_EQ(sf.make(a), EEXIST) << "an empty folder in the way is not replaced";
  EXPECT_TRUE(fs::is_directory(a));
  EXPECT_TRUE(spares_on_disk().empty()) << "the spare that could not be used is removed, not leaked";
}

TEST_F(SpareFoldersTest, ASpareRemovedBehindItsBackStillGivesTheFolder) {
  SpareFolders sf(dir_, 2, keep_tasks());
  refill(sf);
  for (const std::string& p : spares_on_disk()) ASSERT_EQ(::rmdir(p.c_str()), 0);
  const std::string a = dir_ + "/new-a~1";
  ASSERT_EQ(sf.make(a), 0);
  EXPECT_TRUE(fs::is_directory(a));
}

TEST_F(SpareFoldersTest, ANameTakenAlreadyIsPassedBy) {
  ASSERT_EQ(::mkdir((dir_ + "/spare-0").c_str(), 0700), 0);  // left by an earlier daemon
  SpareFolders sf(dir_, 2, keep_tasks());
  refill(sf);
  EXPECT_EQ(sf.ready(), 2u);
  EXPECT_EQ(spares_on_disk().size(), 3u);
}

/// A prepare step that leaves a file and a FIFO in each spare.
int file_and_fifo(int dirfd) {
  const int fd = ::openat(dirfd, "made", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  ::close(fd);
  return ::mkfifoat(dirfd, "fifo", 0600) == 0 ? 0 : errno;
}

TEST_F(SpareFoldersTest, ASpareHoldsWhatPrepareMadeInIt) {
  SpareFolders sf(dir_, 2, keep_tasks(), file_and_fifo);
  refill(sf);
  ASSERT_EQ(sf.ready(), 2u);
  const std::string a = dir_ + "/new-a~1";
  ASSERT_EQ(sf.make(a), 0);
  EXPECT_TRUE(fs::is_regular_file(a + "/made"));
  EXPECT_TRUE(fs::is_fifo(a + "/fifo"));
  EXPECT_EQ(mode_of(a), 0700u);
  EXPECT_EQ(sf.ready(), 1u);
}

TEST_F(SpareFoldersTest, AnEmptyFolderIsMadeWithoutTakingASpare) {
  SpareFolders sf(dir_, 2, keep_tasks(), file_and_fifo);
  refill(sf);
  const std::string a = dir_ + "/new-slot";
  ASSERT_EQ(sf.make_empty(a), 0);
  EXPECT_TRUE(fs::is_empty(a));
  EXPECT_EQ(mode_of(a), 0700u);
  EXPECT_EQ(sf.ready(), 2u);
  EXPECT_EQ(sf.make_empty(a), EEXIST);
}

TEST_F(SpareFoldersTest, ASpareThatCannotBePreparedIsNotKept) {
  SpareFolders sf(dir_, 2, keep_tasks(), [](int) { return EIO; });
  refill(sf);
  EXPECT_EQ(sf.ready(), 0u);
  EXPECT_TRUE(spares_on_disk().empty()) << "a half-made spare is removed";
  const std::string a = dir_ + "/new-a~1";
  ASSERT_EQ(sf.make(a), 0) << "the start makes its own folder meanwhile";
  EXPECT_TRUE(fs::is_empty(a));
}

TEST_F(SpareFoldersTest, TheSparesGoWithIt) {
  {
    SpareFolders sf(dir_, 4, keep_tasks(), file_and_fifo);
    refill(sf);
    ASSERT_EQ(spares_on_disk().size(), 4u);
    ASSERT_EQ(sf.make(dir_ + "/new-kept~1"), 0);
  }
  EXPECT_TRUE(spares_on_disk().empty());
  EXPECT_TRUE(fs::is_directory(dir_ + "/new-kept~1")) << "a folder given out is the caller's";
}

}  // namespace
