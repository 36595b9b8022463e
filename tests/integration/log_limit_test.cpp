// -o log_max: the log keeps the first half of log_max, a marker line and
// the latest output; status.json, wait and the log views say so.
#include <cstdio>
#include <sstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class LogLimitTest : public SbxfsTest {
 protected:
  LogLimitTest() { daemon_options_ = {"-o", "log_max=4096"}; }
};

TEST_F(LogLimitTest, SmallCapKeepsTheStartAndTheEndAndCountsTheRest) {
  const std::string marker =
      "\n[sbxfs: log_max (4096 bytes) reached: output dropped here is counted in droppedBytes; the latest output "
      "follows]\n";
  std::string id = start("head -c 100000 /dev/zero | tr '\\0' x; echo; echo last");
  ASSERT_FALSE(id.empty());
  json w = wait_json(id);
  ASSERT_TRUE(w.is_object());
  EXPECT_EQ(w["proc"]["exitCode"], 0) << "the command ran to its end past the cap";
  EXPECT_EQ(w["proc"]["truncated"], true);
  const std::string log = this->log(id);
  const std::string head = std::string(2048, 'x') + marker;
  ASSERT_TRUE(log.starts_with(head)) << log.substr(0, 2200);
  const std::string kept = log.substr(head.size());
  EXPECT_TRUE(kept.ends_with("xx\nlast\n")) << "what the command printed last";
  EXPECT_GE(kept.size(), 1024u);
  EXPECT_LE(kept.size(), 2048u);
  EXPECT_EQ(kept.find_first_not_of('x'), kept.size() - 6);
  EXPECT_EQ(w["proc"]["droppedBytes"], 100006 - 2048 - kept.size());
  EXPECT_EQ(file("procs/" + id + "/stdout"), log);
  EXPECT_TRUE(w["proc"]["logTail"].get<std::string>().ends_with("x\nlast\n"));
  json st = status_json(id);
  EXPECT_EQ(st["truncated"], true);
  EXPECT_EQ(st["droppedBytes"], 100006 - 2048 - kept.size());

  std::string small = start("echo fits");
  ASSERT_FALSE(small.empty());
  json s = wait_json(small);
  EXPECT_EQ(s["proc"]["truncated"], false);
  EXPECT_EQ(s["proc"]["droppedBytes"], 0);
  EXPECT_EQ(this->log(small), "fits\n");
}

// `tail -f` polls the size once a second (fstat, which reaches the daemon
// without the open file) and takes a smaller one for a truncated file. Past
// log_max a new reader's file is smaller than what a reader that kept up
// has read: tail -f is told its own file's size, and reads every byte
// (audit: "file truncated", the log again from its start, then ENODATA).
TEST_F(LogLimitTest, TailFollowsALogPastTheCapByteForByte) {
  const std::string id = start(
      "i=0; while [ $i -lt 600 ]; do i=$((i+1)); printf 'line%04d\\n' $i; [ $((i%8)) = 0 ] && sleep 0.1; done");
  ASSERT_FALSE(id.empty());
  const pid_t tail =
      spawn_bg("exec tail -s 0.1 -f -n +1 \"$MNT/procs/" + id + "/log\" > \"$T/tail.out\" 2> \"$T/tail.err\"");
  const json w = wait_json(id, 60);
  ASSERT_EQ(w["proc"]["truncated"], true) << "past the cap: " << w.dump();
  std::string want;
  for (int i = 1; i <= 600; ++i) {
    char line[16];
    std::snprintf(line, sizeof line, "line%04d\n", i);
    want += line;
  }
  EXPECT_TRUE(wait_until([&] { return read_file(dir_ + "/tail.out").data.ends_with("line0600\n"); }, 10s));
  ::kill(-tail, SIGKILL);
  wait_bg(tail, 5s);
  EXPECT_EQ(read_file(dir_ + "/tail.err").data, "") << "no \"file truncated\", no read error";
  // Every line once, in order. (tail polls once a second: on a loaded
  // machine it may fall behind by more than the quarter of log_max that
  // the drop leaves, and then gets a marker where it was, as documented.)
  const std::string got = read_file(dir_ + "/tail.out").data;
  std::istringstream lines(got);
  int last = 0, markers = 0;
  bool after_marker = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("[sbxfs: log_max (4096 bytes) reached")) {
      ++markers;
      after_marker = true;
      continue;
    }
    int n = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "line%d", &n), 1) << line;
    ASSERT_GT(n, last) << "line " << n << " again, or out of order";
    if (!after_marker) ASSERT_EQ(n, last + 1) << "a line missing with no marker before it";
    after_marker = false;
    last = n;
  }
  EXPECT_EQ(last, 600);
  if (markers == 0) EXPECT_EQ(got, want);
}

// Once the command has ended the kernel may keep an ended log's pages and
// attributes, but not a log past log_max's: a stat by another process
// would set the size for everyone, and a reader that kept up would be
// told a new reader's smaller one (review).
TEST_F(LogLimitTest, AReaderThatKeptUpIsToldItsOwnSizeAfterTheEnd) {
  const std::string id = start(
      "i=0; while [ $i -lt 600 ]; do i=$((i+1)); printf 'line%04d\\n' $i; [ $((i%8)) = 0 ] && sleep 0.1; done");
  ASSERT_FALSE(id.empty());
  RunResult r = python(
      "import json, os, subprocess, threading, time\n"
      "d = os.environ['MNT'] + '/procs/' + os.environ['ID']\n"
      "fd = os.open(d + '/log', os.O_RDONLY)\n"
      "got, deadline = 0, time.time() + 60\n"
      "while time.time() < deadline:\n"
      "    b = os.read(fd, 65536)\n"
      "    if b:\n"
      "        got += len(b)\n"
      "        continue\n"
      "    if not json.load(open(d + '/status.json'))['running'] and not os.read(fd, 65536):\n"
      "        break\n"
      "    time.sleep(0.05)\n"
      "subprocess.run(['ls', '-l', d], stdout=subprocess.DEVNULL, check=True)\n"
      "other = subprocess.run(['stat', '-c', '%s', d + '/log'], capture_output=True, text=True, check=True)\n"
      "seen = {}\n"
      "t = threading.Thread(target=lambda: seen.update(size=os.fstat(fd).st_size))\n"
      "t.start(); t.join()\n"
      "print(got, os.fstat(fd).st_size, other.stdout.strip(), seen['size'])\n",
      90, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(r.out);
  long long got = 0, own = 0, by_name = 0, from_a_thread = 0;
  in >> got >> own >> by_name >> from_a_thread;
  EXPECT_EQ(got, 600 * 9) << "every byte, no marker: " << r.out;
  EXPECT_EQ(own, got) << r.out;
  EXPECT_LT(by_name, got) << "another process's (a new reader's) is smaller: " << r.out;
  EXPECT_EQ(from_a_thread, got) << "asked by another thread of the reader's: " << r.out;
}

// The size of `log,timestamps` asked by path is a new reader's, also once
// it was asked while the output went past the cap (it was counted on over
// output since dropped; audit).
TEST_F(LogLimitTest, AStampedViewsSizeByPathIsANewReadersPastTheCap) {
  const std::string id = start("for j in 1 2 3 4 5 6; do seq 1 300; sleep 0.3; done");
  ASSERT_FALSE(id.empty());
  const std::string view = "\"$MNT/procs/" + id + "/log,timestamps\"";
  // Asked while it runs, as `tail -f` or a watcher would.
  RunResult polled = run("for k in $(seq 12); do stat -c %s " + view + " >/dev/null; sleep 0.2; done", 30);
  EXPECT_EQ(polled.code, 0) << polled.err;
  const json w = wait_json(id, 30);
  ASSERT_EQ(w["proc"]["truncated"], true) << w.dump();
  RunResult sizes = run("stat -c %s " + view + "; stat -L -c %s /dev/stdin < " + view + "; cat " + view + " | wc -c");
  ASSERT_EQ(sizes.code, 0) << sizes.err;
  std::istringstream in(sizes.out);
  std::uint64_t by_path = 0, by_fstat = 0, read = 0;
  in >> by_path >> by_fstat >> read;
  EXPECT_GT(read, 0u);
  EXPECT_EQ(by_path, read) << sizes.out;
  EXPECT_EQ(by_fstat, read) << sizes.out;
}

}  // namespace
}  // namespace sbxit
