// The kernel keeps the listings of procs/ and logs/ (fsd/listing_cache.hpp):
// a listing asks the daemon for its entries only after a record was made or
// removed, and never shows a record gone or misses one made before it began.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <fcntl.h>
#include <map>
#include <set>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sstream>
#include <string>
#include <thread>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

// `-d` logs every request the kernel sends: READDIR is a listing answered by
// the daemon, not by the kernel's copy.
class ListingCopyTest : public SbxfsTest {
 protected:
  ListingCopyTest() { daemon_options_ = {"-d"}; }

  std::size_t readdirs() const {
    std::istringstream in(daemon_log());
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);)
      if (line.find("opcode: READDIR ") != std::string::npos) ++n;
    return n;
  }
  std::string ls(const std::string& dir) {
    const RunResult r = run("ls \"$MNT/" + dir + "\"");
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out;
  }
};

TEST_F(ListingCopyTest, KeptUntilARecordIsMadeOrRemoved) {
  const std::string a = start("true"), b = start("true");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  wait_ended(a);
  wait_ended(b);
  // The kernel notes the folder's time as it knows it when a copy begins,
  // and drops the copy when it later learns a newer one: its attributes
  // are asked for first, so that the copy begins with b's.
  // (On a loaded machine the folder's time may still move once after the
  // ends were told: the copy is then filled again, once.)
  struct stat st {};
  ASSERT_EQ(::stat(p("procs").c_str(), &st), 0);
  std::size_t filled = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        EXPECT_EQ(ls("procs"), a + "\n" + b + "\n");
        filled = readdirs();
        EXPECT_EQ(ls("procs"), a + "\n" + b + "\n");
        return readdirs() == filled;
      },
      10s))
      << "an ls after a filled one reads the kernel's copy";
  EXPECT_EQ(ls("procs"), a + "\n" + b + "\n");
  EXPECT_EQ(readdirs(), filled) << "and so does the next";

  const std::string c = start("true");
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(ls("procs"), a + "\n" + b + "\n" + c + "\n") << "a start's answer comes before the listing";
  EXPECT_GT(readdirs(), filled);
  ASSERT_EQ(rmdir_errno(p("procs/" + a)), 0);
  EXPECT_EQ(ls("procs"), b + "\n" + c + "\n");
  ASSERT_EQ(mkdir_errno(p("procs/slot")), 0);
  EXPECT_EQ(ls("procs"), b + "\n" + c + "\nslot\n");
  wait_ended(c);

  EXPECT_EQ(ls("logs"), b + ".log\n" + c + ".log\n") << "an empty slot has no log";
  const std::size_t logs_filled = readdirs();
  EXPECT_EQ(ls("logs"), b + ".log\n" + c + ".log\n");
  EXPECT_EQ(readdirs(), logs_filled);
  ASSERT_EQ(write_file(p("procs/slot/cmd"), "true\n"), 0);
  EXPECT_EQ(ls("logs"), b + ".log\n" + c + ".log\nslot.log\n") << "the slot's first run";
}

// Listers that hold the kernel's copy open, fill it or read it while
// records come and go: every listing begun after a start's answer shows the
// record, every one begun after a removal's answer lacks it, and once all
// is quiet the listing is the records'.
TEST_F(ListingCopyTest, ListersBesideStartsAndRemovals) {
  std::atomic<bool> done{false};
  std::atomic<int> listings{0};
  std::vector<std::thread> listers;
  for (int t = 0; t < 3; ++t)
    listers.emplace_back([&, t] {
      while (!done) {
        (void)list_dir(p(t == 2 ? "logs" : "procs"));
        ++listings;
      }
    });
  struct Join {
    std::atomic<bool>& done;
    std::vector<std::thread>& threads;
    ~Join() {
      done = true;
      for (std::thread& th : threads) th.join();
    }
  } join{done, listers};

  std::set<std::string> live;
  for (int i = 0; i < 24; ++i) {
    const std::string id = start("true");
    ASSERT_FALSE(id.empty());
    live.insert(id);
    std::vector<std::string> now = list_dir(p("procs"));
    EXPECT_NE(std::find(now.begin(), now.end(), id), now.end()) << id << " started, not listed";
    if (i % 3 == 2) {
      const std::string gone = *live.begin();
      wait_ended(gone);
      ASSERT_EQ(rmdir_errno(p("procs/" + gone)), 0);
      live.erase(gone);
      now = list_dir(p("procs"));
      EXPECT_EQ(std::find(now.begin(), now.end(), gone), now.end()) << gone << " removed, still listed";
      const std::vector<std::string> logs = list_dir(p("logs"));
      EXPECT_EQ(std::find(logs.begin(), logs.end(), gone + ".log"), logs.end()) << gone << " removed, log listed";
    }
  }
  done = true;
  for (std::thread& th : listers) th.join();
  listers.clear();
  EXPECT_GT(listings.load(), 24);
  for (int round = 0; round < 3; ++round) {
    const std::vector<std::string> names = list_dir(p("procs"));
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), live) << "round " << round;
    EXPECT_EQ(names.size(), live.size()) << "no name twice";
  }
}

// A program reads a big folder in several getdents(2) calls. Records made
// and removed between two calls, and the kernel's copy of the listing let
// go meanwhile (so that the daemon answers the rest from a listing made
// then), make no name come twice and skip none that was there throughout.
TEST_F(ListingCopyTest, AListingReadInPartsRepeatsAndSkipsNothing) {
  std::set<std::string> slots;
  for (int i = 0; i < 300; ++i) {
    const std::string name = "s" + std::to_string(1000 + i);
    ASSERT_EQ(mkdir_errno(p("procs/" + name)), 0) << name;
    slots.insert(name);
  }
  // Reads procs/ in parts of 1 KiB; after the third, `between` runs.
  auto read_in_parts = [&](const std::function<void(const std::vector<std::string>&)>& between) {
    (void)list_dir(p("procs"));  // fills the kernel's copy: the reader below reads it
    const int fd = ::open(p("procs").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    std::map<std::string, int> seen;
    std::vector<std::string> order;
    char buf[1024];
    for (int part = 0;; ++part) {
      if (part == 3) {
        between(order);
        // The kernel lets go of its copy's pages, as under memory pressure.
        EXPECT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
      }
      const long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
      EXPECT_GE(n, 0) << errno_name(errno);
      if (n <= 0) break;
      for (long at = 0; at < n;) {
        struct Head {
          std::uint64_t ino;
          std::int64_t off;
          unsigned short reclen;
          unsigned char type;
        };
        Head h;
        std::memcpy(&h, buf + at, sizeof h);
        const std::string name(buf + at + offsetof(Head, type) + 1);
        if (name != "." && name != "..") {
          ++seen[name];
          order.push_back(name);
        }
        at += h.reclen;
      }
    }
    ::close(fd);
    return seen;
  };

  // Names made ahead of the reader's place (in name order) and some it read removed.
  std::set<std::string> gone, added;
  std::map<std::string, int> seen = read_in_parts([&](const std::vector<std::string>& read) {
    ASSERT_GE(read.size(), 40u) << "three parts of 1 KiB hold more than 40 names";
    for (int i = 0; i < 10; ++i) {
      ASSERT_EQ(rmdir_errno(p("procs/" + read[static_cast<std::size_t>(i)])), 0);
      gone.insert(read[static_cast<std::size_t>(i)]);
    }
    for (int i = 0; i < 40; ++i) {
      const std::string name = "a" + std::to_string(100 + i);
      ASSERT_EQ(mkdir_errno(p("procs/" + name)), 0);
      added.insert(name);
    }
  });
  for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name << " listed " << count << " times";
  for (const std::string& name : slots)
    if (!gone.count(name)) {
      EXPECT_EQ(seen.count(name), 1u) << name << " was there throughout, not listed";
    }
  for (const std::string& name : gone) slots.erase(name);
  slots.insert(added.begin(), added.end());

  // Only removals, of names it read: the rest moves back.
  gone.clear();
  seen = read_in_parts([&](const std::vector<std::string>& read) {
    for (std::size_t i = 0; i < 30 && i < read.size(); ++i) {
      if (!slots.count(read[i])) continue;
      ASSERT_EQ(rmdir_errno(p("procs/" + read[i])), 0);
      gone.insert(read[i]);
    }
  });
  EXPECT_GE(gone.size(), 20u);
  for (const auto& [name, count] : seen) EXPECT_EQ(count, 1) << name << " listed " << count << " times";
  for (const std::string& name : slots)
    if (!gone.count(name)) {
      EXPECT_EQ(seen.count(name), 1u) << name << " was there throughout, not listed";
    }
}

}  // namespace
}  // namespace sbxit
