// The output files of a command: log, stdout, stderr, tail, logs/ID.log,
// read by the tools people use on them.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using FilesTest = SbxfsTest;

TEST_F(FilesTest, LogStdoutStderrSeparation) {
  // Each line waits until the one before is in the log, so the interleaving
  // order is well defined (a pause could be too short on a loaded machine).
  std::string id = start(
      "L=\"$SBX_MOUNT/procs/$SBX_BGID/log\"; at() { while [ $(wc -c < \"$L\") -lt $1 ]; do sleep 0.01; done; }; "
      "echo out1; at 5; echo err1 >&2; at 10; echo out2; at 15; echo err2 >&2");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  EXPECT_EQ(file("procs/" + id + "/stdout"), "out1\nout2\n");
  EXPECT_EQ(file("procs/" + id + "/stderr"), "err1\nerr2\n");
  EXPECT_EQ(log(id), "out1\nerr1\nout2\nerr2\n");
}

// stdout and stderr exist in the state directory from their stream's first
// byte on; a reader that opened them before (tail -f) still sees the bytes.
TEST_F(FilesTest, AStreamOpenedBeforeItsFirstByteSeesItsOutput) {
  std::string id = start("while [ ! -e '" + dir_ + "/go' ]; do sleep 0.02; done; echo late >&2");
  ASSERT_FALSE(id.empty());
  const int fd = ::open(p("procs/" + id + "/stderr").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  char buf[64];
  EXPECT_EQ(::read(fd, buf, sizeof buf), 0);
  EXPECT_FALSE(::access((state_ + "/procs/" + id + "/stderr").c_str(), F_OK) == 0) << "created before its first byte";
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  wait_ended(id);
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  ::close(fd);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "late\n");
  EXPECT_EQ(file("procs/" + id + "/stdout"), "");
  auto tail = run("timeout 5 tail -c +1 \"$MNT/procs/$ID/stderr\"", 10, {{"ID", id}});
  EXPECT_EQ(tail.out, "late\n");
}

// stdout opened while it is still the log's second name (stdout alone had
// written) shows only stdout's bytes after stderr writes too.
TEST_F(FilesTest, AStreamReaderNeverSeesTheOtherStream) {
  std::string id = start("echo a; while [ ! -e '" + dir_ + "/go' ]; do sleep 0.02; done; echo b >&2; echo c");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return file("procs/" + id + "/stdout") == "a\n"; }, 5s));
  const int fd = ::open(p("procs/" + id + "/stdout").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  char buf[64];
  EXPECT_EQ(::pread(fd, buf, sizeof buf, 0), 2);
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  wait_ended(id);
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  ::close(fd);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "a\nc\n");
  EXPECT_EQ(st.st_size, 4);
  EXPECT_EQ(file("procs/" + id + "/stderr"), "b\n");
  const std::string l = log(id);  // b and c: in the order the monitor read them
  EXPECT_TRUE(l == "a\nb\nc\n" || l == "a\nc\nb\n") << l;
  const json o = parse_json(file("procs/" + id + "/output"));
  EXPECT_EQ(o["stdout"], "a\nc\n") << o.dump();
}

TEST_F(FilesTest, LogsDirHoldsTheSameBytes) {
  std::string id = start("seq 1 2000; echo e >&2");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  std::string a = log(id);
  std::string b = file("logs/" + id + ".log");
  EXPECT_GT(a.size(), 8000u);
  EXPECT_EQ(a, b);
  auto names = list_dir(p("logs"));
  EXPECT_NE(std::find(names.begin(), names.end(), id + ".log"), names.end());
  struct stat st;
  ASSERT_EQ(::stat(p("logs/" + id + ".log").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(static_cast<size_t>(st.st_size), a.size());
  auto cmp = run("cmp \"$MNT/procs/$ID/log\" \"$MNT/logs/$ID.log\"", 10, {{"ID", id}});
  EXPECT_EQ(cmp.code, 0) << cmp.out << cmp.err;
}

TEST_F(FilesTest, LogIsARegularFileWithItsRealSize) {
  std::string id = start("printf 12345; while [ ! -e '" + dir_ + "/more' ]; do sleep 0.05; done; printf 6789");
  ASSERT_FALSE(id.empty());
  const std::string log_path = p("procs/" + id + "/log");
  struct stat st;
  ASSERT_TRUE(wait_until([&] { return ::stat(log_path.c_str(), &st) == 0 && st.st_size == 5; }, 5s))
      << "st_size " << st.st_size;
  EXPECT_TRUE(S_ISREG(st.st_mode));
  ASSERT_EQ(write_file(dir_ + "/more", "", O_WRONLY | O_CREAT), 0);
  EXPECT_TRUE(wait_until([&] { return ::stat(log_path.c_str(), &st) == 0 && st.st_size == 9; }, 5s))
      << "st_size did not grow: " << st.st_size;
  wait_ended(id);
  EXPECT_EQ(log(id), "123456789");
  ASSERT_EQ(::stat(p("procs/" + id + "/stdout").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 9);
  ASSERT_EQ(::stat(p("procs/" + id + "/stderr").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
}

TEST_F(FilesTest, TailIsTheLast4096Bytes) {
  std::string id = start("seq 1 3000");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  std::string full = log(id);
  ASSERT_GT(full.size(), 4096u);
  std::string tail = file("procs/" + id + "/tail");
  EXPECT_EQ(tail, full.substr(full.size() - 4096));
  auto w = wait_json(id);
  EXPECT_EQ(w["proc"]["logTail"], full.substr(full.size() - 4096));
}

TEST_F(FilesTest, TailOfShortLogIsTheWholeLog) {
  std::string id = start("echo short; echo err >&2");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  EXPECT_EQ(file("procs/" + id + "/tail"), log(id));
}

TEST_F(FilesTest, ShellToolsOnLog) {
  std::string id = start("seq 1 1000");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  std::string full = log(id);
  auto r = run("tail -c 5 \"$MNT/procs/$ID/log\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "1000\n");
  r = run("wc -c < \"$MNT/procs/$ID/log\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::stoul(r.out), full.size());
  r = run("tail -n 2 \"$MNT/procs/$ID/log\"", 10, {{"ID", id}});
  EXPECT_EQ(r.out, "999\n1000\n");
  r = run("head -n 3 \"$MNT/procs/$ID/stdout\"", 10, {{"ID", id}});
  EXPECT_EQ(r.out, "1\n2\n3\n");
  r = run("grep -c . \"$MNT/logs/$ID.log\"", 10, {{"ID", id}});
  EXPECT_EQ(r.out, "1000\n");
  r = run("cp \"$MNT/procs/$ID/log\" \"$T/copy\" && cat \"$T/copy\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, full);
}

TEST_F(FilesTest, PythonSeekAndRead) {
  std::string id = start("printf 'abcdefghijklmnopqrstuvwxyz'");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  auto r = python(R"(
import os
f = open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/log', 'rb')
f.seek(5); a = f.read(3)
f.seek(-4, 2); b = f.read()
f.seek(0); c = f.read(2)
fd = os.open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/log', os.O_RDONLY)
d = os.pread(fd, 4, 10)
print(a.decode(), b.decode(), c.decode(), d.decode(), os.fstat(fd).st_size)
)",
                  20, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "fgh wxyz ab klmn 26\n");
}

TEST_F(FilesTest, TailFollowSeesLateLines) {
  std::string id = start("echo first-line; while [ ! -e '" + dir_ +
                         "/go' ]; do sleep 0.05; done; echo late-line; sleep 30");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id) == "first-line\n"; }, 5s));
  const std::string out = dir_ + "/tailf.out";
  pid_t tail = spawn_bg("exec tail -f \"$MNT/procs/" + id + "/log\"", out);
  ASSERT_GT(tail, 0);
  ASSERT_TRUE(wait_until([&] { return read_file(out).data.find("first-line") != std::string::npos; }, 5s))
      << "tail -f printed: " << read_file(out).data;
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  // coreutils tail polls a FUSE file every second.
  EXPECT_TRUE(wait_until([&] { return read_file(out).data.find("late-line") != std::string::npos; }, 8s))
      << "tail -f printed: " << read_file(out).data;
  EXPECT_EQ(read_file(out).data.find("truncated"), std::string::npos) << read_file(out).data;
  ::kill(-tail, SIGKILL);
  wait_bg(tail, 5s);
}

TEST_F(FilesTest, LogReadableWhileRunningAndGrowing) {
  std::string id = start("i=0; while [ $i -lt 20 ]; do echo line$i; i=$((i+1)); sleep 0.02; done");
  ASSERT_FALSE(id.empty());
  // Every read, at any moment, is a prefix of the final log.
  std::vector<std::string> seen;
  wait_until(
      [&] {
        seen.push_back(log(id));
        return status_json(id)["running"] == false;
      },
      8s, 30ms);
  auto final_log = log(id);
  std::string want;
  for (int i = 0; i < 20; ++i) want += "line" + std::to_string(i) + "\n";
  EXPECT_EQ(final_log, want);
  for (auto& s : seen) EXPECT_EQ(final_log.compare(0, s.size(), s), 0) << "not a prefix: " << s;
}

}  // namespace
}  // namespace sbxit
