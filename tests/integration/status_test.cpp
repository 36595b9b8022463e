// status.json at the root and procs/ID/status.json.
#include <unistd.h>

#include <sstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using StatusTest = SbxfsTest;

TEST_F(StatusTest, RootSupervisorBlock) {
  auto s = root_status();
  ASSERT_TRUE(s.is_object());
  ASSERT_TRUE(s.contains("supervisor")) << s.dump();
  auto& sup = s["supervisor"];
  EXPECT_TRUE(sup["version"].is_string()) << sup.dump();
  EXPECT_EQ(sup["pid"], daemon_pid());
  EXPECT_TRUE(is_iso_time(sup["startedAt"])) << sup.dump();
  EXPECT_EQ(sup["mountpoint"], mnt_);
  EXPECT_EQ(sup["stateDir"], state_);
  EXPECT_EQ(s["procs"], json::array());
  EXPECT_EQ(s["finished"], 0);
  EXPECT_TRUE(s["hint"].is_string() && !s["hint"].get<std::string>().empty()) << s.dump();
  auto raw = read_file(p("status.json")).data;
  EXPECT_EQ(raw.back(), '\n') << "every JSON file ends with a newline";
}

TEST_F(StatusTest, RootListsRunningOldestFirstAndCountsFinished) {
  std::string a = start("sleep 30");
  std::string b = start("exit 4");
  std::string c = start("sleep 30");
  std::string d = start("true");
  wait_ended(b);
  wait_ended(d);
  auto s = root_status();
  ASSERT_TRUE(s.is_object());
  ASSERT_TRUE(s["procs"].is_array()) << s.dump();
  std::vector<std::string> ids;
  for (auto& pr : s["procs"]) ids.push_back(pr.value("bgId", "?"));
  EXPECT_EQ(ids, (std::vector<std::string>{a, c})) << "running ones, oldest first";
  EXPECT_EQ(s["finished"], 2);
  // Each entry is a summary: exactly the seed's fields that apply to a
  // running command without a ready condition (procs/ID/status.json has the
  // rest), and how it is tracked.
  for (auto& pr : s["procs"]) {
    std::vector<std::string> keys;
    for (auto& [k, v] : pr.items()) keys.push_back(k);
    EXPECT_EQ(keys, (std::vector<std::string>{"bgId", "client", "cmd", "cpu", "cwd", "logPath", "mine", "note",
                                              "pid", "running", "startedAt", "state", "tracking"}));
    EXPECT_EQ(pr["running"], true);
    EXPECT_EQ(pr["cmd"], "sleep 30");
    EXPECT_TRUE(is_iso_time(pr["startedAt"]));
    EXPECT_EQ(pr["logPath"], mnt_ + "/procs/" + pr["bgId"].get<std::string>() + "/log");
    EXPECT_TRUE(pr["mine"].is_boolean());
  }
}

TEST_F(StatusTest, RootIsASnapshotTakenAtOpen) {
  auto r = python(R"(
import os, json
m = os.environ['MNT']
f = open(m + '/status.json')
fd = os.open(m + '/cmd', os.O_RDWR); os.write(fd, b'sleep 30\n'); os.read(fd, 100); os.close(fd)
old = json.loads(f.read())
new = json.load(open(m + '/status.json'))
print(len(old['procs']), len(new['procs']))
)");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "0 1\n");
}

TEST_F(StatusTest, RunningRecordFields) {
  ASSERT_EQ(mkdir_errno(dir_ + "/w"), 0);
  std::string id = start(json({{"cmd", "sleep 30"}, {"cwd", dir_ + "/w"}, {"note", "dev server"}}).dump());
  ASSERT_FALSE(id.empty());
  auto raw = read_file(p("procs/" + id + "/status.json"));
  ASSERT_EQ(raw.err, 0);
  EXPECT_EQ(raw.data.back(), '\n');
  auto s = parse_json(raw.data);
  ASSERT_TRUE(s.is_object()) << raw.data;
  EXPECT_EQ(s["bgId"], id);
  EXPECT_EQ(s["running"], true);
  EXPECT_EQ(s["state"], "running");
  EXPECT_EQ(s["note"], "dev server");
  EXPECT_EQ(s["cmd"], "sleep 30");
  EXPECT_EQ(s["argv"], json({"/bin/sh", "-c", "sleep 30"}));
  EXPECT_EQ(s["cwd"], dir_ + "/w");
  ASSERT_TRUE(s["pid"].is_number_integer()) << s.dump();
  pid_t pid = s["pid"].get<pid_t>();
  EXPECT_TRUE(pid_alive(pid));
  // The command runs in its own session.
  EXPECT_EQ(::getsid(pid), pid);
  EXPECT_TRUE(is_iso_time(s["startedAt"])) << s.dump();
  EXPECT_TRUE(s["finishedAt"].is_null()) << s.dump();
  EXPECT_EQ(s["logPath"], mnt_ + "/procs/" + id + "/log");
  EXPECT_EQ(s["mine"], true) << "started and read from the same session";
  EXPECT_TRUE(s["cpu"].is_number()) << s.dump();
}

// The root list's `cpu` is sampled for the read that shows it: a busy loop
// shows at the first read of the root list, as in its own record.
TEST_F(StatusTest, RootListCpuIsFreshAtTheFirstRead) {
  const std::string busy = start("echo $$ > '" + dir_ + "/busy.pid'; while :; do :; done");
  const std::string idle = start("sleep 30");
  ASSERT_FALSE(busy.empty() || idle.empty());
  // Its own count of CPU time (not sbxfs's): at least 0.3 s used.
  const long hz = ::sysconf(_SC_CLK_TCK);
  ASSERT_TRUE(wait_until(
      [&] {
        const std::string pid = read_file(dir_ + "/busy.pid").data;
        std::string stat = read_file("/proc/" + pid.substr(0, pid.find('\n')) + "/stat").data;
        const std::size_t close = stat.rfind(')');
        if (pid.empty() || close == std::string::npos) return false;
        std::istringstream fields(stat.substr(close + 2));
        std::string f;
        long utime = 0, stime = 0;
        for (int i = 3; i <= 15 && fields >> f; ++i) {
          if (i == 14) utime = std::stol(f);
          if (i == 15) stime = std::stol(f);
        }
        return utime + stime >= hz * 3 / 10;
      },
      10s));
  const json root = root_status();
  double busy_cpu = -1, idle_cpu = -1;
  for (const json& e : root["procs"]) {
    if (e["bgId"] == busy) busy_cpu = e["cpu"].get<double>();
    if (e["bgId"] == idle) idle_cpu = e["cpu"].get<double>();
  }
  EXPECT_GT(busy_cpu, 10) << root["procs"].dump();
  EXPECT_GE(idle_cpu, 0) << root["procs"].dump();
  EXPECT_LT(idle_cpu, 5) << root["procs"].dump();
  EXPECT_GT(status_json(busy)["cpu"].get<double>(), 10);
}

TEST_F(StatusTest, ExitedRecordFields) {
  std::string id = start("echo hi; exit 7");
  ASSERT_FALSE(id.empty());
  auto s = wait_ended(id);
  EXPECT_EQ(s["bgId"], id);
  EXPECT_EQ(s["running"], false);
  EXPECT_EQ(s["state"], "exited");
  EXPECT_EQ(s["exitCode"], 7);
  EXPECT_TRUE(s["signal"].is_null()) << s.dump();
  EXPECT_EQ(s["endReason"], "exited");
  EXPECT_EQ(s["timedOut"], false);
  EXPECT_TRUE(is_iso_time(s["finishedAt"])) << s.dump();
  EXPECT_TRUE(is_iso_time(s["startedAt"])) << s.dump();
  EXPECT_LE(s["startedAt"].get<std::string>(), s["finishedAt"].get<std::string>());
  EXPECT_TRUE(s["pid"].is_number_integer());
  EXPECT_EQ(s["logPath"], mnt_ + "/procs/" + id + "/log");
}

TEST_F(StatusTest, KilledFromElsewhere) {
  std::string id = start("kill -KILL $$");
  ASSERT_FALSE(id.empty());
  auto s = wait_ended(id);
  EXPECT_EQ(s["exitCode"], -1);
  EXPECT_EQ(s["signal"], "SIGKILL");
  EXPECT_EQ(s["endReason"], "killed");
  EXPECT_EQ(s["timedOut"], false);
}

TEST_F(StatusTest, RunningUntilEveryDescendantEnded) {
  // The root exits at once; a background grandchild keeps the command running.
  std::string id = start("touch '" + dir_ + "/started'; (while [ ! -e '" + dir_ +
                         "/release' ]; do sleep 0.05; done) >/dev/null 2>&1 & exit 0");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return stat_errno(dir_ + "/started") == 0; }, 5s));
  // Once the root has exited, the record must still say running.
  auto root = status_json(id)["pid"];
  ASSERT_TRUE(root.is_number_integer());
  ASSERT_TRUE(wait_until([&] { return !pid_alive(root.get<pid_t>()); }, 5s)) << "the root did not exit";
  auto s1 = status_json(id);
  EXPECT_EQ(s1["running"], true) << s1.dump();
  EXPECT_EQ(s1["state"], "running");
  ASSERT_EQ(write_file(dir_ + "/release", "", O_WRONLY | O_CREAT), 0);
  auto s = wait_ended(id);
  EXPECT_EQ(s["exitCode"], 0) << "the root's exit status";
  EXPECT_EQ(s["endReason"], "exited");
}

TEST_F(StatusTest, CmdIsTruncatedTo120Chars) {
  std::string text = "echo " + std::string(200, 'x');
  std::string id = start(text);
  ASSERT_FALSE(id.empty());
  auto s = status_json(id);
  EXPECT_EQ(s["cmd"], text.substr(0, 120));
  EXPECT_EQ(file("procs/" + id + "/cmd"), text + "\n") << "procs/ID/cmd holds the whole command";
  // Characters, not bytes: 115 two-byte ones after "echo ".
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xc3\xa9";
  id = start("echo " + accents);
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(status_json(id)["cmd"], "echo " + accents.substr(0, 115 * 2));
}

TEST_F(StatusTest, MineIsFalseForAnotherSession) {
  auto r = run(R"(setsid -w sh -c 'exec 3<>"$MNT/cmd"; echo "sleep 30" >&3; read -r id <&3; echo "$id"')");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string other = r.out.substr(0, r.out.find('\n'));
  ASSERT_TRUE(is_auto_id(other)) << r.out;
  std::string mine = start("sleep 30");
  EXPECT_EQ(status_json(other)["mine"], false) << "started from another session";
  EXPECT_EQ(status_json(mine)["mine"], true);
  // And seen from that other session, it is the other way round.
  auto o = run(R"(setsid -w sh -c 'cat "$MNT/procs/$ID/status.json"')", 10, {{"ID", mine}});
  auto oj = parse_json(o.out);
  ASSERT_TRUE(oj.is_object()) << o.out << o.err;
  EXPECT_EQ(oj["mine"], false);
}

// In a container entered from outside (docker exec, a CI runner), the session
// leader is outside the PID namespace and getsid(2) says 0 for everyone. A
// shell in a new PID namespace is exactly that: its own commands are still
// `mine`, a setsid program's are not.
TEST_F(StatusTest, MineHoldsWhenTheSessionLeaderIsOutsideThePidNamespace) {
  auto r = run(R"sh(exec unshare --pid --fork --mount-proc sh -c '
    [ "$(ps -o sid= -p $$ | tr -d " ")" = 0 ] || { echo "getsid is not 0 here"; exit 3; }
    mkdir "$T/ns-mnt" "$T/ns-state"
    "$SBXFS" --state-dir "$T/ns-state" "$T/ns-mnt" || exit 4
    M="$T/ns-mnt"
    exec 3<>"$M/cmd"; echo "sleep 30" >&3; read -r mine <&3; exec 3>&-
    other=$(setsid -w sh -c "exec 3<>\"$M/cmd\"; echo \"sleep 30\" >&3; read -r id <&3; echo \$id")
    grep -o "\"mine\": *[a-z]*" "$M/procs/$mine/status.json"
    grep -o "\"mine\": *[a-z]*" "$M/procs/$other/status.json"
    echo stop > "$M/procs/$mine/stop"; echo stop > "$M/procs/$other/stop"
    fusermount3 -u "$M"
    # The namespace ends with this shell, killing what is left in it: let the
    # daemon exit first, as it removes its cgroup subtree on the way out.
    for i in $(seq 200); do pgrep -x sbxfs >/dev/null || break; sleep 0.05; done')sh",
               30, {{"SBXFS", SBXFS_PATH}});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "\"mine\": true\n\"mine\": false\n") << r.err;
}

TEST_F(StatusTest, ProcStatusIsASnapshotTakenAtOpen) {
  std::string id = start("while [ ! -e '" + dir_ + "/go' ]; do sleep 0.05; done");
  ASSERT_FALSE(id.empty());
  int fd = ::open(p("procs/" + id + "/status.json").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  wait_ended(id);
  std::string data;
  char buf[8192];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<size_t>(n));
  ::close(fd);
  auto s = parse_json(data);
  ASSERT_TRUE(s.is_object()) << data;
  EXPECT_EQ(s["running"], true) << "the snapshot was taken when the file was opened";
}

TEST_F(StatusTest, UnknownProcIsENOENT) {
  EXPECT_EQ(stat_errno(p("procs/9999")), ENOENT);
  EXPECT_EQ(read_file(p("procs/9999/status.json")).err, ENOENT);
  EXPECT_EQ(read_file(p("logs/9999.log")).err, ENOENT);
}

}  // namespace
}  // namespace sbxit
