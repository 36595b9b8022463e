// Reading the log views without secrets: replies come straight from the
// state directory's file (spliced), clamped at its end, and st_blksize
// invites large reads. Every byte must match the file, at any offset/size.
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using LogReadTest = SbxfsTest;

TEST_F(LogReadTest, LargeAndOddReadsMatchTheStateFile) {
  // 3 MiB + 7 of varied bytes on stdout, a little on stderr.
  std::string id = start("head -c 3145735 /dev/urandom; echo e >&2");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  auto r = python(R"(
import os
m = os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/'
s = os.environ['STATE'] + '/procs/' + os.environ['ID'] + '/'
bad = []
for name in ('log', 'stdout', 'stderr'):
    want = open(s + name, 'rb').read()
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

}  // namespace
}  // namespace sbxit
