// Reading the log views without secrets: replies come straight from the
// state directory's file (spliced), clamped at its end, and st_blksize
// invites large reads. Every byte must match the file, at any offset/size.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using LogReadTest = SbxfsTest;

TEST_F(LogReadTest, LargeAndOddReadsMatchTheStateFile) {
  // 3 MiB + 7 of varied bytes on stdout, then a little on stderr once the
  // log holds all of stdout (the monitor reads the two pipes in any order:
  // only then is the log stdout's bytes followed by stderr's).
  std::string id = start("head -c 3145735 /dev/urandom; "
                         "while [ \"$(stat -c %s \"$SBX_MOUNT/procs/$SBX_BGID/log\")\" -lt 3145735 ]; do sleep 0.01; done; "
                         "echo e >&2");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  auto r = python(R"(
import os
m = os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/'
s = os.environ['STATE'] + '/procs/' + os.environ['ID'] + '/'
bad = []
whole = open(s + 'log', 'rb').read()  # stdout's bytes, then stderr's "e\n"
wants = {'log': whole, 'stdout': whole[:-2], 'stderr': whole[-2:]}
for name in ('log', 'stdout', 'stderr'):
    want = wants[name]
    fd = os.open(m + name, os.O_RDONLY)
    st = os.fstat(fd)
    if st.st_size != len(want): bad.append(f'{name}: size {st.st_size} != {len(want)}')
    if st.st_blksize != 524288: bad.append(f'{name}: st_blksize {st.st_blksize}')
    with open(m + name, 'rb', buffering=0) as f:
        got = b''.join(iter(lambda: f.read(1 << 20), b''))
    if got != want: bad.append(f'{name}: whole read differs ({len(got)} bytes)')
    n = len(want)
    for off, size in ((0, 1), (1, 4095), (4095, 1 << 20), (max(0, n - 3), 4096), (n, 10), (n + 5, 10),
                      (123457, 777777), (max(0, n - 524288), 524288 + 100)):
        got = os.pread(fd, size, off)
        if got != want[off:off + size]: bad.append(f'{name}: pread({size}, {off}) gave {len(got)} bytes')
    os.close(fd)
print('\n'.join(bad) or 'ok')
)",
                  30, {{"ID", id}, {"STATE", state_}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
}

// One open `stdout`, read and fstat'ed from 8 threads at once while it
// changes from the log's second name to a file of its own (stderr's first
// byte): every read gives stdout's bytes at that offset, none fails.
TEST_F(LogReadTest, ConcurrentReadsAcrossTheStreamSplit) {
  std::string want;  // what `seq 1 30000` prints
  for (int i = 1; i <= 30000; ++i) want += std::to_string(i) + "\n";
  const std::size_t half = want.find("15001\n");
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string go = dir_ + "/go" + std::to_string(round);
    const std::string id = start("seq 1 15000; while [ ! -e '" + go + "' ]; do sleep 0.01; done; echo e >&2; seq 15001 30000");
    ASSERT_FALSE(id.empty());
    const std::string path = p("procs/" + id + "/stdout");
    struct stat st {};
    ASSERT_TRUE(wait_until([&] { return ::stat(path.c_str(), &st) == 0 && st.st_size == off_t(half); }, 5s));
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    std::atomic<bool> ended{false};
    std::atomic<int> errors{0}, wrong{0}, reads{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 8; ++t)
      readers.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(round * 8 + t));
        std::string buf(16 * 1024, '\0');
        // Until the end, and then a few more (the file is complete by then).
        for (int after = 0; after < 20;) {
          if (ended) ++after;
          const std::size_t size = 1 + rng() % buf.size();
          const off_t off = static_cast<off_t>(rng() % want.size());
          const ssize_t n = ::pread(fd, buf.data(), size, off);
          struct stat fst {};
          if (n < 0 || ::fstat(fd, &fst) != 0) {
            ++errors;
            continue;
          }
          ++reads;
          if (buf.compare(0, static_cast<std::size_t>(n), want, static_cast<std::size_t>(off),
                          static_cast<std::size_t>(n)) != 0)
            ++wrong;
        }
      });
    ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT), 0);
    wait_ended(id);
    ended = true;
    for (std::thread& r : readers) r.join();
    std::string all(want.size() + 10, '\0');
    const ssize_t n = ::pread(fd, all.data(), all.size(), 0);
    ::close(fd);
    EXPECT_EQ(errors, 0) << "of " << reads << " reads";
    EXPECT_EQ(wrong, 0) << "of " << reads << " reads, some showed other bytes";
    ASSERT_GE(n, 0);
    all.resize(static_cast<std::size_t>(n));
    EXPECT_TRUE(all == want) << all.size() << " bytes of " << want.size();
    EXPECT_EQ(file("procs/" + id + "/stderr"), "e\n");
  }
}

}  // namespace
}  // namespace sbxit
