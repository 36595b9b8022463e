// procs/ID/wait: the blocking read, its answer, interrupts, poll() and the cap.
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using WaitTest = SbxfsTest;

TEST_F(WaitTest, EndedCommandAnswersAtOnce) {
  std::string id = start("echo some output; exit 7");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  auto r = run("cat \"$MNT/procs/$ID/wait\"", 10, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 2.0);
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  auto w = parse_json(r.out);
  ASSERT_TRUE(w.is_object()) << r.out;
  EXPECT_EQ(w["stillRunning"], false);
  auto& proc = w["proc"];
  EXPECT_EQ(proc["bgId"], id);
  EXPECT_EQ(proc["exitCode"], 7);
  EXPECT_EQ(proc["running"], false);
  EXPECT_EQ(proc["state"], "exited");
  EXPECT_EQ(proc["endReason"], "exited");
  EXPECT_EQ(proc["logTail"], "some output\n");
  EXPECT_TRUE(is_iso_time(proc["finishedAt"]));
  EXPECT_EQ(proc["logPath"], mnt_ + "/procs/" + id + "/log");
}

TEST_F(WaitTest, BlocksUntilTheCommandEnds) {
  std::string id = start("while [ ! -e '" + dir_ + "/go' ]; do sleep 0.05; done; echo finished; exit 3");
  ASSERT_FALSE(id.empty());
  const std::string out = dir_ + "/wait.out";
  pid_t waiter = spawn_bg("exec cat \"$MNT/procs/" + id + "/wait\"", out);
  // Still blocked while the command runs.
  EXPECT_FALSE(wait_until([&] { return !read_file(out).data.empty(); }, 500ms))
      << "wait answered early: " << read_file(out).data;
  EXPECT_FALSE(wait_bg(waiter, 10ms).has_value()) << "cat wait returned while the command runs";
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  auto rc = wait_bg(waiter, 10s);
  ASSERT_TRUE(rc.has_value()) << "cat wait did not return after the command ended";
  EXPECT_EQ(*rc, 0);
  auto w = parse_json(read_file(out).data);
  ASSERT_TRUE(w.is_object()) << read_file(out).data;
  EXPECT_EQ(w["stillRunning"], false);
  EXPECT_EQ(w["proc"]["exitCode"], 3);
  EXPECT_EQ(w["proc"]["logTail"], "finished\n");
}

TEST_F(WaitTest, InterruptedReaderIsReleasedAtOnce) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  auto r = run("timeout 1 cat \"$MNT/procs/$ID/wait\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 124) << r.out << r.err;
  EXPECT_LT(r.seconds, 3.0) << "the interrupted read was not released";
  auto s = status_json(id);
  EXPECT_EQ(s["running"], true) << "an interrupted wait must not touch the command";
  // A second interrupted reader, by SIGINT this time (Ctrl-C).
  r = run("timeout -s INT 0.5 cat \"$MNT/procs/$ID/wait\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 124) << r.out << r.err;
  EXPECT_LT(r.seconds, 3.0);
  EXPECT_EQ(status_json(id)["running"], true);
  // Waiting still works afterwards.
  EXPECT_EQ(run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}}).code, 0);
  auto w = wait_json(id);
  EXPECT_EQ(w["proc"]["endReason"], "stopped");
}

TEST_F(WaitTest, AnswerIsFixedAtFirstReadThenEof) {
  std::string id = start("echo x");
  ASSERT_FALSE(id.empty());
  auto r = python(R"(
import os, json
f = open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/wait', 'rb', buffering=0)
a = f.read(10)
b = f.read(1 << 20)
c = f.read(100)
d = json.loads(a + b)
print(len(a), d['proc']['exitCode'], d['stillRunning'], repr(c), (a + b).endswith(b'\n'))
)",
                  20, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "10 0 False b'' True\n");
}

TEST_F(WaitTest, PollReportsReadableWhenTheAnswerIsReady) {
  std::string id = start("while [ ! -e '" + dir_ + "/go' ]; do sleep 0.05; done");
  ASSERT_FALSE(id.empty());
  auto r = python(R"(
import os, select, json
fd = os.open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/wait', os.O_RDONLY | os.O_NONBLOCK)
p = select.poll(); p.register(fd, select.POLLIN)
before = p.poll(300)
open(os.environ['T'] + '/go', 'w').close()
after = p.poll(10000)
data = os.read(fd, 1 << 20)
print(len(before), len(after), json.loads(data)['stillRunning'])
)",
                  30, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0 1 False\n") << "poll: not readable while running, readable once ended";
}

TEST_F(WaitTest, EmptySlotAnswersAtOnce) {
  ASSERT_EQ(mkdir_errno(p("procs/slot1")), 0);
  auto r = run("cat \"$MNT/procs/slot1/wait\"", 10);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 2.0);
  auto w = parse_json(r.out);
  ASSERT_TRUE(w.is_object()) << r.out;
  EXPECT_EQ(w["stillRunning"], false);
  EXPECT_EQ(w["proc"]["state"], "empty");
  EXPECT_EQ(w["proc"]["bgId"], "slot1");
}

class WaitCapTest : public SbxfsTest {
 protected:
  WaitCapTest() { daemon_options_ = {"-o", "wait_timeout=1"}; }
};

TEST_F(WaitCapTest, CapAnswersStillRunning) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  auto r = run("cat \"$MNT/procs/$ID/wait\"", 10, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GE(r.seconds, 0.8) << "answered before the cap";
  EXPECT_LT(r.seconds, 5.0) << "the 1 s cap was not applied";
  auto w = parse_json(r.out);
  ASSERT_TRUE(w.is_object()) << r.out;
  EXPECT_EQ(w["stillRunning"], true);
  EXPECT_EQ(w["proc"]["running"], true);
  EXPECT_EQ(w["proc"]["bgId"], id);
  EXPECT_TRUE(w["proc"].contains("logTail"));
  EXPECT_EQ(status_json(id)["running"], true);
}

TEST_F(WaitCapTest, EndedCommandStillAnswersAtOnce) {
  std::string id = start("exit 2");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  // Timed in this process: parked, the read would last the 1 s cap.
  const Clock::time_point t0 = Clock::now();
  const FileResult r = read_file(p("procs/" + id + "/wait"));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 0.9);
  auto w = parse_json(r.data);
  ASSERT_TRUE(w.is_object()) << r.data;
  EXPECT_EQ(w["stillRunning"], false);
  EXPECT_EQ(w["proc"]["exitCode"], 2);
}

}  // namespace
}  // namespace sbxit
