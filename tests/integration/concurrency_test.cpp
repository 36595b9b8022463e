// Many readers and writers at once: parked waits hold no thread, concurrent
// starts get unique ids.
#include <dirent.h>
#include <signal.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using ConcurrencyTest = SbxfsTest;

/// Processes in process group `pgid` whose comm is `comm`.
int count_in_group(pid_t pgid, const std::string& comm) {
  int n = 0;
  for (auto& e : list_dir("/proc")) {
    if (e.empty() || !std::isdigit(static_cast<unsigned char>(e[0]))) continue;
    auto st = read_file("/proc/" + e + "/stat").data;
    auto open = st.find('('), close = st.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    if (st.substr(open + 1, close - open - 1) != comm) continue;
    std::istringstream in(st.substr(close + 2));
    std::string state, ppid, pgrp;
    in >> state >> ppid >> pgrp;
    if (state != "Z" && pgrp == std::to_string(pgid)) ++n;
  }
  return n;
}

double seconds_to(const std::function<void()>& f) {
  auto t0 = Clock::now();
  f();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST_F(ConcurrencyTest, HundredBlockedWaitsWhileEverythingElseStaysFast) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(mkdir_errno(dir_ + "/w"), 0);
  pid_t group = spawn_bg("i=0; while [ $i -lt 100 ]; do i=$((i+1)); cat \"$MNT/procs/" + id +
                         "/wait\" > \"$T/w/$i.out\" 2> \"$T/w/$i.err\" & done; wait");
  ASSERT_GT(group, 0);
  ASSERT_TRUE(wait_until([&] { return count_in_group(group, "cat") == 100; }, 10s))
      << "only " << count_in_group(group, "cat") << " cat processes";
  // Let them all reach the daemon (they block in read; nothing to poll for
  // but their wait channel).
  wait_until(
      [&] {
        int blocked = 0;
        for (auto& e : list_dir("/proc")) {
          if (e.empty() || !std::isdigit(static_cast<unsigned char>(e[0]))) continue;
          auto w = read_file("/proc/" + e + "/wchan").data;
          if (w.find("fuse") != std::string::npos || w.find("request_wait") != std::string::npos) ++blocked;
        }
        return blocked >= 100;
      },
      5s);
  EXPECT_EQ(count_in_group(group, "cat"), 100) << "some wait readers returned early";

  // A worker held by each parked wait would hold these until the stop below;
  // answered, they take milliseconds (the bound leaves room for a loaded
  // machine).
  constexpr double kAnswered = 5.0;
  double t = seconds_to([&] {
    auto r = read_file(p("status.json"));
    EXPECT_EQ(r.err, 0);
    EXPECT_TRUE(parse_json(r.data).is_object());
  });
  EXPECT_LT(t, kAnswered) << "status.json took " << t << " s with 100 parked waits";
  t = seconds_to([&] { EXPECT_EQ(status_json(id)["running"], true); });
  EXPECT_LT(t, kAnswered);
  t = seconds_to([&] { EXPECT_FALSE(procs().empty()); });
  EXPECT_LT(t, kAnswered);
  t = seconds_to([&] {
    auto r = run("cat \"$MNT/status.json\" > /dev/null", 10);
    EXPECT_EQ(r.code, 0);
  });
  EXPECT_LT(t, kAnswered) << "cat status.json";
  std::string other;
  t = seconds_to([&] { other = start("echo other"); });
  EXPECT_LT(t, kAnswered) << "starting a command";
  EXPECT_FALSE(other.empty());
  t = seconds_to([&] { EXPECT_EQ(wait_json(other)["proc"]["exitCode"], 0); });
  EXPECT_LT(t, kAnswered) << "a wait on an ended command";

  auto r = run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  auto rc = wait_bg(group, 10s);
  ASSERT_TRUE(rc.has_value()) << count_in_group(group, "cat") << " wait readers still blocked after the stop";
  int good = 0;
  for (int i = 1; i <= 100; ++i) {
    auto w = parse_json(read_file(dir_ + "/w/" + std::to_string(i) + ".out").data);
    if (w.is_object() && w["stillRunning"] == false && w["proc"]["endReason"] == "stopped") ++good;
  }
  EXPECT_EQ(good, 100) << "every reader gets the answer";
}

TEST_F(ConcurrencyTest, HundredConcurrentStartsFromTenProcesses) {
  extend_watchdog(30s);
  ASSERT_EQ(mkdir_errno(dir_ + "/starts"), 0);
  // 10 shells, each starting 10 `exit N` with the read-back, all at once.
  auto r = run(R"(
p=0
while [ $p -lt 10 ]; do
  (
    j=0
    while [ $j -lt 10 ]; do
      n=$((p * 10 + j))
      exec 3<>"$MNT/cmd"
      echo "exit $n" >&3
      read -r id <&3
      exec 3>&-
      echo "$n $id" >> "$T/starts/$p"
      j=$((j + 1))
    done
  ) &
  p=$((p + 1))
done
wait
)",
               40);
  ASSERT_EQ(r.code, 0) << r.err;
  std::map<std::string, int> by_id;
  int lines = 0;
  for (int p = 0; p < 10; ++p) {
    std::istringstream in(read_file(dir_ + "/starts/" + std::to_string(p)).data);
    int n;
    std::string id;
    while (in >> n >> id) {
      ++lines;
      EXPECT_TRUE(is_auto_id(id)) << id;
      EXPECT_TRUE(by_id.emplace(id, n).second) << "id " << id << " given twice";
    }
  }
  EXPECT_EQ(lines, 100);
  EXPECT_EQ(by_id.size(), 100u);
  auto names = procs();
  EXPECT_EQ(names.size(), 100u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (auto& [id, n] : by_id) {
    auto w = parse_json(read_file(p("procs/" + id + "/wait")).data);
    ASSERT_TRUE(w.is_object()) << id;
    EXPECT_EQ(w["proc"]["exitCode"], n) << "procs/" << id;
    EXPECT_EQ(w["proc"]["cmd"], "exit " + std::to_string(n));
  }
}

TEST_F(ConcurrencyTest, ConcurrentStartsFromPython) {
  extend_watchdog(30s);
  auto r = python(R"(
import os, json
from concurrent.futures import ProcessPoolExecutor
def worker(p):
    out = []
    for j in range(10):
        n = p * 10 + j
        fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)
        os.write(fd, json.dumps({"cmd": "exit %d" % n, "note": "n%d" % n}).encode())
        out.append((n, os.read(fd, 100).decode().strip()))
        os.close(fd)
    return out
with ProcessPoolExecutor(10) as ex:
    res = [x for part in ex.map(worker, range(10)) for x in part]
print(json.dumps(res))
)",
                  40);
  ASSERT_EQ(r.code, 0) << r.err;
  auto res = parse_json(r.out);
  ASSERT_TRUE(res.is_array()) << r.out;
  std::set<std::string> ids;
  for (auto& e : res) ids.insert(e[1].get<std::string>());
  EXPECT_EQ(ids.size(), 100u);
  for (auto& e : res) {
    std::string id = e[1];
    auto w = parse_json(read_file(p("procs/" + id + "/wait")).data);
    ASSERT_TRUE(w.is_object()) << id;
    EXPECT_EQ(w["proc"]["exitCode"], e[0]);
    EXPECT_EQ(w["proc"]["note"], "n" + e[0].dump());
  }
}

TEST_F(ConcurrencyTest, StatusAllListsACommandEndingMeanwhileOnce) {
  // Commands end while status.json,all is built: each is listed once,
  // running or ended (it was once listed in both).
  extend_watchdog(30s);
  auto r = python(R"(
import os, json, threading, time
M = os.environ['MNT']
stop = time.time() + 5
def churn():
    while time.time() < stop:
        fd = os.open(M + '/cmd', os.O_RDWR)
        os.write(fd, b'{"cmd": "exit 3"}')
        i = os.read(fd, 100).decode().strip()
        os.close(fd)
        open(M + '/procs/' + i + '/wait').read()
ts = [threading.Thread(target=churn) for _ in range(3)]
for t in ts: t.start()
reads = dups = 0
while time.time() < stop:
    ids = [p['bgId'] for p in json.load(open(M + '/status.json,all'))['procs']]
    reads += 1
    if len(ids) != len(set(ids)): dups += 1
for t in ts: t.join()
print(reads, dups)
)",
                  40);
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream in(r.out);
  int reads = 0, dups = -1;
  in >> reads >> dups;
  EXPECT_GT(reads, 0) << r.out;
  EXPECT_EQ(dups, 0) << r.out;
}

TEST_F(ConcurrencyTest, ManyConcurrentStops) {
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(start("sleep 30"));
  std::string list;
  for (auto& id : ids) list += id + " ";
  auto r = run("for id in $IDS; do echo > \"$MNT/procs/$id/stop\" & done; wait", 20, {{"IDS", list}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_LT(r.seconds, 5.0);
  for (auto& id : ids) EXPECT_EQ(status_json(id)["endReason"], "stopped") << id;
  EXPECT_EQ(root_status()["procs"], json::array());
}

// A parked write or close is answered by the event thread while its handler
// may still be returning; the kernel then closes the file and releases its
// handle at once. Many stops and waits ending together exercise that race;
// the sanitizer build (the fixture reads the daemon's log for its reports)
// catches a handle freed under a running handler.
TEST_F(ConcurrencyTest, AnswersRacingTheirCloseLeaveTheDaemonWhole) {
  extend_watchdog(120s);
  auto started = python(R"(
import os
m = os.environ['MNT']
for i in range(120):
    fd = os.open(m + '/cmd', os.O_RDWR)
    os.write(fd, b'sleep 120\n')
    print(os.read(fd, 100).decode().strip())
    os.close(fd)
)",
                        120);
  ASSERT_EQ(started.code, 0) << started.err;
  // Each stop begins as the one before ends, so that the event thread is
  // free to answer a stop the moment it is parked.
  auto r = run(R"(for id in $IDS; do
  p="$MNT/procs/$id"
  cat "$p/status.json" > /dev/null
  echo > "$p/stop" &
  cat "$p/wait" > /dev/null &
done
wait)",
               60, {{"IDS", started.out}});
  EXPECT_EQ(r.code, 0) << r.err;
  const json root = root_status();
  EXPECT_EQ(root["procs"], json::array()) << root.dump();
  EXPECT_TRUE(pid_alive(daemon_pid())) << daemon_log();
}

}  // namespace
}  // namespace sbxit
