// The tree used from another machine over sshfs, with the recipe of
// sbxfs.8 (REMOTE USE): a real sshd from Debian on 127.0.0.1 with a
// throwaway key, and sshfs with -o direct_io,max_conns=4.
//
// Why those options: sshfs's kernel side caches file contents by size, and
// the tree's files have size 0 (their contents are made at open), so without
// direct_io a read back from `cmd` or a read of status.json sees nothing.
// And one SFTP connection serves one request at a time, so a blocked read of
// `wait` would stall every other operation on it; with max_conns=N, sshfs
// gives each open file the connection with the fewest open files, so up to
// N-1 blocked reads leave the others free.
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "../common/free_port.hpp"
#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

class RemoteTest : public SbxfsTest {
 protected:
  RemoteTest() { watchdog_budget_ = std::chrono::seconds(90); }

  void SetUp() override {
    SbxfsTest::SetUp();
    if (HasFatalFailure()) return;
    if (::geteuid() != 0) GTEST_SKIP() << "sshd for this test needs root";
    remote_ = dir_ + "/remote";
    ::mkdir(remote_.c_str(), 0755);
    port_ = sbxtest_common::free_port();
    // Host and user keys, and an sshd that listens on the loopback only.
    RunResult keys = run(
        "cd \"$T\" && ssh-keygen -q -t ed25519 -N '' -f host_key && ssh-keygen -q -t ed25519 -N '' -f user_key && "
        "cp user_key.pub authorized_keys && mkdir -p /run/sshd && "
        "printf '%s\\n' 'Port " + std::to_string(port_) + "' 'ListenAddress 127.0.0.1' "
        "\"HostKey $T/host_key\" \"AuthorizedKeysFile $T/authorized_keys\" 'PermitRootLogin prohibit-password' "
        "'PasswordAuthentication no' 'KbdInteractiveAuthentication no' 'UsePAM no' 'StrictModes no' "
        "\"PidFile $T/sshd.pid\" 'Subsystem sftp internal-sftp' > sshd_config && "
        "/usr/sbin/sshd -f \"$T/sshd_config\" -E \"$T/sshd.log\"");
    ASSERT_EQ(keys.code, 0) << keys.out << keys.err;
    sshd_started_ = true;
    const std::string mnt = mnt_;
    RunResult m = run("sshfs -o direct_io,max_conns=4,IdentityFile=\"$T/user_key\",port=" + std::to_string(port_) +
                          ",StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes "
                          "root@127.0.0.1:\"$MNT\" \"$T/remote\"",
                      30);
    ASSERT_EQ(m.code, 0) << m.out << m.err << read_file(dir_ + "/sshd.log").data;
    mounted_ = true;
    ASSERT_EQ(stat_errno(remote_ + "/status.json"), 0);
  }

  void TearDown() override {
    // Before the fixture removes DIR: never through a mount.
    if (mounted_) {
      if (run_argv({"fusermount3", "-u", remote_}).code != 0) run_argv({"fusermount3", "-uz", remote_});
    }
    if (sshd_started_) run("kill $(cat \"$T/sshd.pid\") 2>/dev/null");
    SbxfsTest::TearDown();
  }

  /// bash with R = the remote (sshfs) view of the tree.
  RunResult remote(const std::string& script, int timeout_sec = 20) {
    return bash("R=\"$T/remote\"; " + script, timeout_sec);
  }

  std::string remote_;
  int port_ = 0;
  bool sshd_started_ = false;
  bool mounted_ = false;
};

TEST_F(RemoteTest, StartReadBackWaitReadyAndStop) {
  // The bgId read back from the same open cmd, as on a local mount.
  RunResult s = remote("exec 3<>\"$R/cmd\"; echo 'echo over-ssh; sleep 0.2' >&3; read -r id <&3; exec 3>&-; "
                       "echo \"id=$id\"; cat \"$R/procs/$id/wait\"");
  ASSERT_EQ(s.code, 0) << s.out << s.err;
  const std::string id = s.out.substr(3, s.out.find('\n') - 3);
  ASSERT_TRUE(is_auto_id(id)) << s.out;
  json w = parse_json(s.out.substr(s.out.find('\n') + 1));
  ASSERT_TRUE(w.is_object()) << s.out;
  EXPECT_EQ(w["stillRunning"], false);
  EXPECT_EQ(w["proc"]["exitCode"], 0);
  EXPECT_NE(w["proc"]["logTail"].get<std::string>().find("over-ssh"), std::string::npos);

  // A readiness condition written remotely, the blocked read answered.
  RunResult r = remote("exec 3<>\"$R/cmd\"; "
                       "printf '%s\\n' '{\"cmd\": \"sleep 0.3; echo Listening; sleep 60\", \"readyLog\": \"^Listening\"}' >&3; "
                       "read -r id <&3; exec 3>&-; echo \"$id\"; cat \"$R/procs/$id/ready\"");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string server = r.out.substr(0, r.out.find('\n'));
  json ready = parse_json(r.out.substr(r.out.find('\n') + 1));
  ASSERT_TRUE(ready.is_object()) << r.out;
  EXPECT_EQ(ready["ready"], true) << r.out;

  // stop returns once the tree is gone.
  RunResult st = remote("echo > \"$R/procs/" + server + "/stop\" && cat \"$R/procs/" + server + "/status.json\"");
  ASSERT_EQ(st.code, 0) << st.out << st.err;
  json rec = parse_json(st.out);
  EXPECT_EQ(rec["running"], false) << st.out;
  EXPECT_EQ(rec["endReason"], "stopped") << st.out;
}

TEST_F(RemoteTest, ABlockedReadLeavesTheOtherOperationsFree) {
  const std::string id = start("sleep 60");
  ASSERT_FALSE(id.empty());
  // Every connection made once (sshfs connects the others lazily, an ssh
  // handshake each): four reads at once.
  RunResult warm = remote("for i in 1 2 3 4; do cat \"$R/status.json\" > /dev/null & done; wait");
  ASSERT_EQ(warm.code, 0) << warm.err;
  const pid_t waiter = spawn_bg("cat \"$T/remote/procs/" + id + "/wait\" > \"$T/wait.out\"");
  // Measure once the SFTP server's read of wait is blocked in the tree (the
  // server process has the local file open and waits for our answer).
  const std::string blocked =
      "for f in /proc/[0-9]*/fd/*; do case \"$(readlink \"$f\" 2>/dev/null)\" in \"$MNT/procs/" + id +
      "/wait\") p=${f#/proc/}; p=${p%%/*}; grep -qx request_wait_answer /proc/$p/wchan && exit 0;; esac; done; "
      "exit 1";
  ASSERT_TRUE(wait_until([&] { return run(blocked).code == 0; }, 10s, 50ms));
  for (int i = 0; i < 3; ++i) {
    RunResult other = remote("cat \"$R/status.json\" > /dev/null && ls \"$R/procs\" > /dev/null && cat \"$R/procs/" + id +
                             "/status.json\"");
    ASSERT_EQ(other.code, 0) << other.err;
    // Stalled, it would take until the command ends (60 s); free, tens of ms.
    EXPECT_LT(other.seconds, 5.0) << "attempt " << i;
  }
  RunResult stop = remote("echo > \"$R/procs/" + id + "/stop\"");
  EXPECT_EQ(stop.code, 0) << stop.err;
  ASSERT_TRUE(wait_bg(waiter, 10s).has_value());
  json w = parse_json(read_file(dir_ + "/wait.out").data);
  EXPECT_EQ(w["stillRunning"], false) << w.dump();
}

}  // namespace
}  // namespace sbxit
