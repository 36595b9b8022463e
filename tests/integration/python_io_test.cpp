// Driving the tree with nothing but Python file I/O, as an agent that only
// has "read file" and "write file" tools would.
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using PythonIoTest = SbxfsTest;

TEST_F(PythonIoTest, AgentFlowMkdirWriteCmdReadWait) {
  auto r = python(R"(
import os, json
m = os.environ['MNT']
print(open(m + '/README').read()[:1] != '')
os.makedirs(m + '/procs/agent1', exist_ok=True)
with open(m + '/procs/agent1/cmd', 'w') as f:
    f.write('echo hi from python; sleep 0.1; echo oops >&2; exit 2\n')
w = json.loads(open(m + '/procs/agent1/wait').read())
print(w['stillRunning'], w['proc']['bgId'], w['proc']['exitCode'], repr(w['proc']['logTail']))
print(repr(open(m + '/procs/agent1/stdout').read()), repr(open(m + '/procs/agent1/stderr').read()))
s = json.load(open(m + '/status.json'))
print(s['finished'], len(s['procs']))
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "True\n"
            "False agent1 2 'hi from python\\noops\\n'\n"
            "'hi from python\\n' 'oops\\n'\n"
            "1 0\n");
}

TEST_F(PythonIoTest, MakedirsTwiceIsFine) {
  auto r = python(R"(
import os
m = os.environ['MNT']
os.makedirs(m + '/procs/twice', exist_ok=True)
os.makedirs(m + '/procs/twice', exist_ok=True)
try:
    os.mkdir(m + '/procs/twice')
except FileExistsError:
    print('EEXIST')
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "EEXIST\n");
}

TEST_F(PythonIoTest, ReadBackWithOsOpenReadWrite) {
  auto r = python(R"(
import os
fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
os.write(fd, b'echo via python\n')
print(os.read(fd, 100).decode(), end='')
os.close(fd)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_TRUE(is_auto_id(id)) << r.out;
  EXPECT_EQ(r.out, id + "\n");
  wait_json(id);
  EXPECT_EQ(log(id), "via python\n");
}

TEST_F(PythonIoTest, JsonDumpWithOpenW) {
  auto r = python(R"(
import os, json
with open(os.environ['MNT'] + '/cmd', 'w') as f:
    json.dump({"argv": ["/bin/echo", "dumped"], "note": "json.dump", "env": {"A": "1"}}, f, indent=2)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  auto w = wait_json(ids[0]);
  EXPECT_EQ(w["proc"]["note"], "json.dump");
  EXPECT_EQ(w["proc"]["logTail"], "dumped\n");
}

TEST_F(PythonIoTest, MegabyteJsonRequestInOneWrite) {
  auto r = python(R"(
import os, json
data = json.dumps({"cmd": "echo big note", "note": "n" * 1000000}).encode()
fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
n = os.write(fd, data)
print(n == len(data), os.read(fd, 100).decode().strip())
os.close(fd)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(r.out.rfind("True ", 0), 0u) << r.out;
  std::string id = r.out.substr(5, r.out.find('\n') - 5);
  ASSERT_TRUE(is_auto_id(id)) << r.out;
  auto w = wait_json(id);
  EXPECT_EQ(w["proc"]["logTail"], "big note\n");
  auto s = status_json(id);
  ASSERT_TRUE(s["note"].is_string());
  EXPECT_EQ(s["note"].get<std::string>().size(), 1000000u);
}

TEST_F(PythonIoTest, MegabytePlainTextRequestInOneWrite) {
  // A shell command with a ~1 MB comment, in one f.write(): executed at
  // close at the latest, exactly once.
  auto r = python(R"(
import os
with open(os.environ['MNT'] + '/cmd', 'w') as f:
    f.write('echo big command # ' + 'c' * 1000000 + '\n')
)");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  auto w = wait_json(ids[0]);
  EXPECT_EQ(w["proc"]["logTail"], "big command\n");
  EXPECT_EQ(file("procs/" + ids[0] + "/cmd").size(), std::string("echo big command # ").size() + 1000000 + 1);
}

TEST_F(PythonIoTest, TheRestOfARefusedSplitWriteIsNoCommand) {
  // A JSON request over 1 MiB reaches the daemon in pieces; the last one
  // completes it and is refused (the name is taken). write(2) returns the
  // first pieces' count, and a writer that loops writes the rest again:
  // text that, run by the shell, would touch the flag. It must get the
  // errno instead, and nothing may run.
  ASSERT_EQ(bash("echo '{\"argv\": [\"true\"], \"name\": \"taken\"}' > \"$MNT/cmd\"").code, 0);
  const std::size_t lines = errors().size();
  auto r = python(R"(
import os, json, errno, subprocess
m, t = os.environ['MNT'], os.environ['T']
def request(flag):
    return json.dumps({"name": "taken", "cmd": "echo " + "x" * 1200000, "note": "; touch " + flag + " #"})
try:
    with open(m + '/cmd', 'w') as f:
        f.write(request(t + '/ran-python'))
    print('python: no error')
except OSError as e:
    print('python:', errno.errorcode[e.errno])
fd = os.open(m + '/cmd', os.O_WRONLY)
data = request(t + '/ran-loop').encode()
n = os.write(fd, data)
print('short count:', 0 < n < len(data))
try:
    os.write(fd, data[n:])
    print('rest: written')
except OSError as e:
    print('rest:', errno.errorcode[e.errno])
os.close(fd)
with open(t + '/req.json', 'w') as f:
    f.write(request(t + '/ran-dd'))
dd = subprocess.run(['dd', 'if=' + t + '/req.json', 'of=' + m + '/cmd', 'bs=4M'], capture_output=True)
print('dd:', dd.returncode != 0, b'File exists' in dd.stderr)
)",
                  60);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "python: EEXIST\nshort count: True\nrest: EEXIST\ndd: True True\n");
  EXPECT_EQ(procs(), std::vector<std::string>{"taken"}) << "the rest of a refused write started a command";
  for (const char* flag : {"/ran-python", "/ran-loop", "/ran-dd"}) EXPECT_NE(stat_errno(dir_ + flag), 0) << flag;
  // One line for each refused request, none for the rests written again.
  EXPECT_EQ(errors().size(), lines + 3);
}

TEST_F(PythonIoTest, LargePlainTextRequestWithReadBack) {
  // 120 000 bytes: under 128 KiB, so complete at its write (read-back works).
  auto r = python(R"(
import os
fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
os.write(fd, ('echo large command # ' + 'c' * 120000 + '\n').encode())
print(os.read(fd, 100).decode(), end='')
os.close(fd)
)");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_TRUE(is_auto_id(id)) << r.out;
  EXPECT_EQ(wait_json(id)["proc"]["logTail"], "large command\n");
}

TEST_F(PythonIoTest, ChunkedWritesWithFlushAreOneRequest) {
  auto r = python(R"(
import os
with open(os.environ['MNT'] + '/cmd', 'w') as f:
    for part in ['echo ', 'chun', 'ked\n']:
        f.write(part); f.flush()
)");
  ASSERT_EQ(r.code, 0) << r.err;
  auto ids = procs();
  ASSERT_EQ(ids.size(), 1u);
  wait_json(ids[0]);
  EXPECT_EQ(log(ids[0]), "chunked\n");
}

TEST_F(PythonIoTest, ErrorReadBackAndErrnoFromPython) {
  auto r = python(R"(
import os, json
m = os.environ['MNT']
fd = os.open(m + '/cmd', os.O_RDWR)
try:
    os.write(fd, b'{"cmd": "true", "cwd": "/definitely/not/here"}')
except OSError as e:
    print(e.errno == __import__('errno').ENOENT)
print(os.read(fd, 4096).decode().startswith('error: ENOENT: '))
os.close(fd)
last = open(m + '/errors').read().splitlines()[-1]
print(json.loads(last)['errno'])
print(os.listdir(m + '/procs'))
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "True\nTrue\nENOENT\n[]\n");
}

TEST_F(PythonIoTest, AnAnswerReadBackFromTheStartComesOnce) {
  // open(..., 'r+'), write, seek(0), read(): the answer from its start,
  // then end of file; never its end a second time.
  ASSERT_EQ(start(R"({"cmd": "echo ready1; sleep 30", "name": "rd"})"), "rd");
  ASSERT_TRUE(wait_until([&] { return log("rd") == "ready1\n"; }, 5s));
  auto r = python(R"(
import os, json
m = os.environ['MNT']
with open(m + '/procs/rd/ready', 'r+') as f:
    f.write('log ^ready1$\n'); f.flush(); f.seek(0)
    print(json.loads(f.read())['ready'])
fd = os.open(m + '/cmd', os.O_RDWR)
try:
    os.write(fd, b'{"cmd": "true", "bogus": 1}')
except OSError:
    pass
os.lseek(fd, 0, os.SEEK_SET)
answer = b''
while chunk := os.read(fd, 16):
    answer += chunk
os.close(fd)
print(answer.decode().startswith('error: EINVAL: unknown key'), answer.count(b'\n'))
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "True\nTrue 1\n");
}

TEST_F(PythonIoTest, StopAndSignalFromPython) {
  auto r = python(R"(
import os, json, time
m = os.environ['MNT']
fd = os.open(m + '/cmd', os.O_RDWR)
os.write(fd, b"trap 'echo got-term; exit 0' TERM; echo up; while :; do sleep 0.05; done\n")
i = os.read(fd, 100).decode().strip()
os.close(fd)
deadline = time.monotonic() + 5
while open(m + '/procs/%s/log' % i).read() != 'up\n' and time.monotonic() < deadline:
    time.sleep(0.02)
with open(m + '/procs/%s/signal' % i, 'w') as f:
    f.write('SIGTERM')
w = json.loads(open(m + '/procs/%s/wait' % i).read())
print(w['proc']['exitCode'], w['proc']['logTail'].startswith('up\n'), 'got-term\n' in w['proc']['logTail'])
)");
  ASSERT_EQ(r.code, 0) << r.err;
  // (dash may also print "Terminated" for its sleep, killed by the same SIGTERM.)
  EXPECT_EQ(r.out, "0 True True\n");
}

}  // namespace
}  // namespace sbxit
