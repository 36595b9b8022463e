// An ended command's output is kept by the kernel (ended_output_cache.hpp):
// its log, stdout, stderr and logs/ID.log open through the page cache once
// it has exited, and are dropped from it when its named slot runs again or
// its record is removed. While it runs, every read reaches the daemon.
#include <csignal>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class EndedOutputTest : public SbxfsTest {
 protected:
  /// Slot `s` made, `command` run in it to its end.
  void slot_ran(const std::string& command) {
    ASSERT_EQ(run("mkdir \"$MNT/procs/s\" && printf '%s\\n' \"$C\" > \"$MNT/procs/s/cmd\" && cat \"$MNT/procs/s/wait\"", 20,
                  {{"C", command}})
                  .code,
              0);
  }
};

// mmap(2) of a FUSE file works only through the page cache: the kernel
// refuses it (ENODEV) on a direct_io file.
constexpr const char* kMmapAll = R"(
import mmap, os, sys
bad = []
for name in sys.argv[1:]:
    path = os.environ['MNT'] + '/' + name
    try:
        with open(path, 'rb') as f:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            got = m[:]
            m.close()
            plain = open(path, 'rb').read()
        if got != plain: bad.append(f'{name}: mapped {len(got)} bytes != read {len(plain)}')
        print(name, 'mapped', len(got))
    except OSError as e:
        print(name, 'error', e.errno)
sys.stderr.write('\n'.join(bad))
)";

TEST_F(EndedOutputTest, AnEndedCommandsOutputMapsAndARunningOnesDoesNot) {
  const std::string done = start("printf 'out%.0s' $(seq 3000); printf 'err\\n' >&2");
  const std::string going = start("echo started; exec sleep 30");
  ASSERT_FALSE(done.empty());
  ASSERT_FALSE(going.empty());
  wait_json(done);
  ASSERT_TRUE(wait_until([&] { return log(going) == "started\n"; }, 5s));
  const std::string d = "procs/" + done + "/";
  auto r = run_argv({"python3", "-c", kMmapAll, d + "log", d + "stdout", d + "stderr", "logs/" + done + ".log",
                     "procs/" + going + "/log"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, d + "log mapped 9004\n" + d + "stdout mapped 9000\n" + d + "stderr mapped 4\n" + "logs/" + done +
                       ".log mapped 9004\nprocs/" + going + "/log error 19\n");
  // A name with parameters is a reader's own view: never kept.
  r = run_argv({"python3", "-c", kMmapAll, d + "log,timestamps"});
  EXPECT_EQ(r.out, d + "log,timestamps error 19\n");
}

// Held open and read once, the ended output reads again while the daemon
// is stopped: pages and size come from the kernel, no request reaches it.
// (Not fstat: after a read the kernel asks the daemon for the atime.)
TEST_F(EndedOutputTest, ASecondReadOfEndedOutputNeedsNoDaemon) {
  const std::string id = start("seq 1 100000");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  auto r = python(R"(
import os, signal
fd = os.open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/stdout', os.O_RDONLY)
first = os.read(fd, 1 << 20)
os.kill(int(os.environ['DPID']), signal.SIGSTOP)
try:
    signal.alarm(5)  # a read that reached the stopped daemon would block: killed instead
    again = os.pread(fd, 1 << 20, 0)
    middle = os.pread(fd, 7, 300000)
    signal.alarm(0)
finally:
    os.kill(int(os.environ['DPID']), signal.SIGCONT)
print(len(first), again == first, middle == first[300000:300007])
)",
                  20, {{"ID", id}, {"DPID", std::to_string(daemon_pid())}});
  kill_daemon(SIGCONT, false);  // whatever happened to the script
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "588895 True True\n");
}

// A named slot's next run, and a record removed and made again under the
// same name, show their own output: size and bytes, through new opens.
TEST_F(EndedOutputTest, ASlotsNextRunAndARemadeRecordShowTheirOwnOutput) {
  ASSERT_EQ(run("mkdir \"$MNT/procs/s\"").code, 0);
  auto once = [&](const std::string& cmd) {
    return run("echo '" + cmd + "' > \"$MNT/procs/s/cmd\" && cat \"$MNT/procs/s/wait\" > /dev/null && "
               "for f in log stdout; do stat -c %s \"$MNT/procs/s/$f\"; cat \"$MNT/procs/s/$f\"; done && "
               "cat \"$MNT/logs/s.log\"");
  };
  auto r = once("echo one");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "4\none\n4\none\none\n");
  r = once("echo second-run");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "11\nsecond-run\n11\nsecond-run\nsecond-run\n");
  ASSERT_EQ(run("rmdir \"$MNT/procs/s\" && mkdir \"$MNT/procs/s\"").code, 0);
  r = once("echo 3");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "2\n3\n2\n3\n3\n");
}

// A descriptor held on an ended slot's log: its attributes, kept by the
// kernel, are dropped when the slot runs again, so fstat shows the size
// of the log the name now has (as stat of the path does).
TEST_F(EndedOutputTest, AHeldDescriptorSeesTheSizeOfTheSlotsNextRun) {
  ASSERT_EQ(run("mkdir \"$MNT/procs/s\" && echo 'echo one' > \"$MNT/procs/s/cmd\" && cat \"$MNT/procs/s/wait\"").code, 0);
  auto r = python(R"(
import os, time
s = os.environ['MNT'] + '/procs/s/'
fd = os.open(s + 'log', os.O_RDONLY)
os.read(fd, 100)
os.fstat(fd)  # after a read the kernel asks the daemon once (the atime), and keeps the answer
before = os.fstat(fd).st_size
with open(s + 'cmd', 'w') as f: f.write('echo 0123456789abcdef\n')
open(s + 'wait').read()
deadline = time.monotonic() + 5
while os.fstat(fd).st_size != 17 and time.monotonic() < deadline: time.sleep(0.02)
print(before, os.fstat(fd).st_size)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "4 17\n");
}

// What a held descriptor reads agrees with what fstat says: the bytes of
// the run the name shows now, as with a file rewritten in place, for the
// log, a stream and a timestamped view. A removed record's stay readable.
TEST_F(EndedOutputTest, AHeldDescriptorReadsTheSlotsNextRun) {
  ASSERT_EQ(run("mkdir \"$MNT/procs/s\" && echo 'seq 1 7' > \"$MNT/procs/s/cmd\" && cat \"$MNT/procs/s/wait\"").code, 0);
  auto r = python(R"(
import os
s = os.environ['MNT'] + '/procs/s/'
fds = {n: os.open(s + n, os.O_RDONLY) for n in ('log', 'stdout', 'log,timestamps')}
first = {n: os.pread(fd, 4096, 0) for n, fd in fds.items()}
with open(s + 'cmd', 'w') as f: f.write('seq 100 120\n')
open(s + 'wait').read()
now = {n: os.pread(fd, 4096, 0) for n, fd in fds.items()}
for n, fd in fds.items():
    print(n, first[n].count(b'\n'), now[n].count(b'\n'), len(now[n]) == os.fstat(fd).st_size,
          now[n].endswith(b'120\n'))
os.rmdir(s)
print('removed', os.pread(fds['log'], 4096, 0) == now['log'])
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "log 7 21 True True\nstdout 7 21 True True\nlog,timestamps 7 21 True True\nremoved True\n");
}

// The next run's secrets are masked in what a held descriptor reads.
TEST_F(EndedOutputTest, AHeldDescriptorMasksTheNextRunsSecrets) {
  ASSERT_EQ(run("mkdir \"$MNT/procs/s\" && echo 'echo first' > \"$MNT/procs/s/cmd\" && cat \"$MNT/procs/s/wait\"").code, 0);
  auto r = python(R"(
import os
s = os.environ['MNT'] + '/procs/s/'
fd = os.open(s + 'log', os.O_RDONLY)
os.pread(fd, 4096, 0)
with open(s + 'cmd', 'w') as f: f.write('{"cmd": "echo token=$TOKEN", "secretEnv": {"TOKEN": "hunter2-next"}}\n')
open(s + 'wait').read()
print(os.pread(fd, 4096, 0).decode(), end='')
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "token=************\n");
}

// The start of a slot's next run returns once the kernel has let go of the
// last run's pages: a descriptor held open reads the new run at once (not
// only after its wait), however soon after the start it reads.
TEST_F(EndedOutputTest, AHeldDescriptorReadsTheNextRunAsSoonAsItsStartReturned) {
  auto r = python(R"(
import os
s = os.environ['MNT'] + '/procs/h/'
os.mkdir(s)
stale = 0
for i in range(30):
    with open(s + 'cmd', 'w') as f: f.write('echo first\n')
    open(s + 'wait').read()
    fd = os.open(s + 'log', os.O_RDONLY)
    assert os.pread(fd, 4096, 0) == b'first\n'
    with open(s + 'cmd', 'w') as f: f.write('echo second\n')
    got = os.pread(fd, 4096, 0)
    if got == b'first\n': stale += 1
    elif got not in (b'', b'second\n'): print('unexpected', got)
    open(s + 'wait').read()
    os.close(fd)
print('stale', stale)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "stale 0\n");
}

// `tail -f` on a slot's log goes on with its next run.
TEST_F(EndedOutputTest, TailFollowsTheSlotsNextRun) {
  ASSERT_EQ(run("mkdir \"$MNT/procs/s\" && echo 'echo one' > \"$MNT/procs/s/cmd\" && cat \"$MNT/procs/s/wait\"").code, 0);
  const std::string out = dir_ + "/tail.out";
  spawn_bg("exec tail -f \"$MNT/procs/s/log\"", out);
  ASSERT_TRUE(wait_until([&] { return read_file(out).data == "one\n"; }, 10s));
  ASSERT_EQ(run("echo 'seq 100 120' > \"$MNT/procs/s/cmd\" && cat \"$MNT/procs/s/wait\"").code, 0);
  // tail goes on from where it was (byte 4 of the new log), or from the
  // start when it saw the new log shorter than that.
  EXPECT_TRUE(wait_until(
      [&] {
        const std::string t = read_file(out).data;
        return t.size() > 4 && t.ends_with("119\n120\n");
      },
      10s))
      << read_file(out).data;
}

// A file opened and not read yet is bound to the record it was opened on:
// removed, that record's output is still read (fstat first, as cat and
// tail do), and its events end with its real end.
TEST_F(EndedOutputTest, ADescriptorNotReadBeforeTheRmdirStillReadsTheRecord) {
  slot_ran("echo hello; exit 3");
  auto r = python(R"(
import json, os
s = os.environ['MNT'] + '/procs/s/'
fds = {n: os.open(s + n, os.O_RDONLY) for n in ('log', 'stdout', 'log,timestamps', 'events')}
os.rmdir(s)
for n in ('log', 'stdout'):
    print(n, os.fstat(fds[n]).st_size, os.read(fds[n], 4096))
print('stamped', os.read(fds['log,timestamps'], 4096).decode().endswith('Z hello\n'))
events = [json.loads(l) for l in os.read(fds['events'], 65536).decode().splitlines()]
print([e['type'] for e in events], events[-1].get('exit', {}).get('code'), events[-1].get('endReason'))
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "log 6 b'hello\\n'\nstdout 6 b'hello\\n'\nstamped True\n['stdout', 'terminal'] 3 exited\n");
}

// Python: whole(fd), what a file descriptor reads up to EOF.
constexpr const char* kWhole = R"(
import os
def whole(fd):
    out = b''
    while True:
        b = os.read(fd, 65536)
        if not b: return out
        out += b
)";

// A follower opened on a slot's ended run and first read after the slot
// runs again shows its own run and ends with it (events: its own end),
// not the new run's output or an end of a run still going.
TEST_F(EndedOutputTest, AFollowerOpenedBeforeTheSlotRunsAgainShowsItsOwnRun) {
  slot_ran("echo one; exit 3");
  auto r = python(std::string(kWhole) + R"(
import json, os
s = os.environ['MNT'] + '/procs/s/'
fds = {n: os.open(s + n, os.O_RDONLY) for n in ('log,follow', 'stdout,follow', 'events', 'events,follow')}
with open(s + 'cmd', 'w') as f: f.write('echo two; while [ ! -e "$T/go" ]; do sleep 0.02; done\n')
for n in ('log,follow', 'stdout,follow'): print(n, whole(fds[n]))
for n in ('events', 'events,follow'):
    events = [json.loads(l) for l in whole(fds[n]).decode().splitlines()]
    print(n, [e.get('data', e['type']) for e in events], events[-1].get('exit', {}).get('code'), events[-1].get('endReason'))
open(os.environ['T'] + '/go', 'w').close()
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "log,follow b'one\\n'\nstdout,follow b'one\\n'\nevents ['one\\n', 'terminal'] 3 exited\n"
            "events,follow ['one\\n', 'terminal'] 3 exited\n");
  EXPECT_EQ(wait_json("s")["proc"]["exitCode"], 0);
}

// Opened while its run still ran, read only after that run ended and the
// slot ran again: the events end with that run's own end (the record that
// replaced it keeps it), not with the state of the run now going.
TEST_F(EndedOutputTest, EventsOpenedWhileTheRunRanEndWithItsEndAfterTheSlotRunsAgain) {
  ASSERT_FALSE(start(json{{"name", "s"}, {"cmd", "while [ ! -e \"$T/go1\" ]; do sleep 0.02; done; echo one; exit 3"}}
                         .dump())
                   .empty());
  auto r = python(std::string(kWhole) + R"(
import json, os
s, t = os.environ['MNT'] + '/procs/s/', os.environ['T']
fds = {n: os.open(s + n, os.O_RDONLY) for n in ('events', 'events,follow')}
open(t + '/go1', 'w').close()
with open(s + 'wait') as f: print('first', json.load(f)['proc']['exitCode'])
with open(s + 'cmd', 'w') as f: f.write('echo two; while [ ! -e "$T/go2" ]; do sleep 0.02; done\n')
for n in ('events', 'events,follow'):
    events = [json.loads(l) for l in whole(fds[n]).decode().splitlines()]
    print(n, [e.get('data', e['type']) for e in events], events[-1].get('state'),
          events[-1].get('exit', {}).get('code'), events[-1].get('endReason'))
open(t + '/go2', 'w').close()
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "first 3\nevents ['one\\n', 'terminal'] exited 3 exited\n"
            "events,follow ['one\\n', 'terminal'] exited 3 exited\n");
  EXPECT_EQ(wait_json("s")["proc"]["exitCode"], 0);
}

}  // namespace
}  // namespace sbxit
