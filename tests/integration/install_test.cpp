// sbxfs as installed: the Debian package (built with cpack from this build,
// installed into a scratch root with dpkg --root), its systemd units
// (systemd-analyze verify), and mounts made by mount(8): `mount -t
// fuse.sbxfs none DIR -o ...` and an fstab line, through mount.fuse3.
//
// mount(8) runs its helpers with a PATH of its own (/usr/local/sbin,
// /usr/sbin, /sbin, ...), so the mount tests run in a private mount namespace
// where this build's bin folder is bind-mounted over /usr/local/sbin: a real
// mount call that finds sbxfs without installing anything on the machine.
#include <sys/stat.h>

#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

const std::string kBin = std::string(SBXFS_PATH).substr(0, std::string(SBXFS_PATH).rfind('/'));

class InstallTest : public SbxfsTest {
 protected:
  InstallTest() { watchdog_budget_ = std::chrono::seconds(120); }

  /// Runs `script` with bash in a private mount namespace whose
  /// /usr/local/sbin is this build's bin folder. M is DIR/m2 (made), S
  /// DIR/s2; whatever the script leaves mounted at M is unmounted on exit.
  RunResult in_mount_namespace(const std::string& script) {
    const std::string m = dir_ + "/m2";
    ::mkdir(m.c_str(), 0755);
    const std::string body = "set -e; M='" + m + "'; S='" + dir_ + "/s2'; " +
                             "trap 'fusermount3 -u \"$M\" 2>/dev/null || fusermount3 -uz \"$M\" 2>/dev/null' EXIT; " +
                             "mount --bind '" + kBin + "' /usr/local/sbin; " + script;
    return run_argv({"unshare", "--mount", "--propagation", "private", "bash", "-c", body}, 60);
  }
};

TEST_F(InstallTest, ADaemonCopiedAloneFindsSbxStepWhereItWasBuilt) {
  // sbxfs and its monitor copied to a folder of their own, without
  // sbx-step: the commands still find it, in the build's bin folder.
  const std::string script =
      "set -e; B=\"$T/alone\"; M=\"$T/m3\"; mkdir -p \"$B\" \"$M\"; "
      "cp '" + kBin + "/sbxfs' '" + kBin + "/sbxfs-monitor' \"$B\"/; "
      "trap 'fusermount3 -u \"$M\" 2>/dev/null || fusermount3 -uz \"$M\" 2>/dev/null' EXIT; "
      "\"$B/sbxfs\" --state-dir \"$T/s3\" \"$M\"; "
      "exec 3<>\"$M/cmd\"; echo 'command -v sbx-step' >&3; read -r id <&3; exec 3>&-; "
      "cat \"$M/procs/$id/wait\" > /dev/null; cat \"$M/procs/$id/log\"";
  const RunResult r = run(script, 30);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, kBin + "/sbx-step\n") << r.err;
}

TEST_F(InstallTest, MountHelperStartsTheDaemonWithMountOptions) {
  // mount.fuse3 runs `sbxfs none M -o rw,state_dir=S,...`: a source
  // argument, the state directory as an -o option, and mount's own flags.
  RunResult r = in_mount_namespace(
      "mount -t fuse.sbxfs none \"$M\" -o state_dir=\"$S\",wait_timeout=7,max_running=3; "
      "grep -q \" $M fuse.sbxfs \" /proc/self/mounts; "
      "exec 3<>\"$M/cmd\"; echo 'echo via-mount' >&3; read -r id <&3; exec 3>&-; "
      "cat \"$M/procs/$id/wait\" >/dev/null; cat \"$M/procs/$id/log\"; "
      "grep -q 'After 7 s it answers' \"$M/README\" && echo wait-cap-ok; "
      "test -d \"$S/procs/$id\"; echo state-ok");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("via-mount"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("state-ok"), std::string::npos) << "the record is in the state_dir given as -o: " << r.out
                                                       << r.err;
  EXPECT_NE(r.out.find("wait-cap-ok"), std::string::npos) << "-o wait_timeout=7 applies: " << r.out << r.err;
}

TEST_F(InstallTest, FstabLineMounts) {
  // An /etc/fstab line, read from a file of the test's (mount -T).
  const std::string secrets = dir_ + "/secrets";
  ASSERT_EQ(write_file(secrets, "TOKEN=hunter2-fstab\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  RunResult r = in_mount_namespace(
      "printf 'none %s fuse.sbxfs defaults,noauto,state_dir=%s,secrets_file=" + secrets +
      "\\n' \"$M\" \"$S\" > \"$S.fstab\"; "
      "mount -T \"$S.fstab\" \"$M\"; "
      "exec 3<>\"$M/cmd\"; echo 'echo token=hunter2-fstab' >&3; read -r id <&3; exec 3>&-; "
      "cat \"$M/procs/$id/wait\" >/dev/null; cat \"$M/procs/$id/log\"; test -d \"$S/procs/$id\"; echo state-ok");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("token=****"), std::string::npos) << "secrets_file= applies: " << r.out << r.err;
  EXPECT_EQ(r.out.find("hunter2-fstab"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("state-ok"), std::string::npos) << r.out << r.err;
}

TEST_F(InstallTest, TooManyArgumentsIsAUsageError) {
  RunResult r = run_argv({SBXFS_PATH, "-f", "none", dir_ + "/m2", "extra"}, 10);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("too many arguments"), std::string::npos) << r.err;
}

TEST_F(InstallTest, DebianPackageInstallsAWorkingTree) {
  // Build the package of this very build (as the README's package command does).
  const std::string out = dir_ + "/pkg";
  RunResult c = run_argv({"cpack", "--config", std::string(SBX_BINARY_DIR) + "/CPackConfig.cmake", "-B", out}, 110);
  ASSERT_EQ(c.code, 0) << c.out << c.err;
  RunResult deb = run("ls \"$T\"/pkg/sbxfs_*_*.deb");
  ASSERT_EQ(deb.code, 0) << deb.out << deb.err;
  const std::string pkg = deb.out.substr(0, deb.out.find('\n'));

  RunResult info = run_argv({"dpkg-deb", "-f", pkg, "Package", "Depends"});
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_NE(info.out.find("Package: sbxfs"), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("fuse3"), std::string::npos) << "fusermount3 and mount.fuse3: " << info.out;
  EXPECT_NE(info.out.find("libfuse3-3"), std::string::npos) << info.out;

  // Into a scratch root, with dpkg's own bookkeeping.
  const std::string root = dir_ + "/root";
  RunResult inst = run("R=\"$T/root\"; mkdir -p \"$R\"/var/lib/dpkg/info \"$R\"/var/lib/dpkg/updates && "
                       ": > \"$R\"/var/lib/dpkg/status && : > \"$R\"/var/lib/dpkg/available && "
                       "dpkg --root=\"$R\" --force-depends --force-script-chrootless -i '" + pkg + "' && "
                       "dpkg --root=\"$R\" -L sbxfs",
                       60);
  ASSERT_EQ(inst.code, 0) << inst.out << inst.err;
  const std::string prefix = std::string(SBX_INSTALL_PREFIX);
  for (const std::string f : {"/bin/sbxfs", "/bin/sbxfs-monitor", "/bin/sbx-step", "/share/man/man8/sbxfs.8",
                              "/share/man/man5/sbxfs.5", "/lib/systemd/system/sbxfs.service",
                              "/lib/systemd/system/sbxfs@.service"}) {
    EXPECT_NE(inst.out.find(prefix + f + "\n"), std::string::npos) << f << " not in the package:\n" << inst.out;
    struct stat st {};
    EXPECT_EQ(::stat((root + prefix + f).c_str(), &st), 0) << f;
  }
  // The man pages render.
  RunResult man = run_argv({"man", "-l", "-Tutf8", root + prefix + "/share/man/man8/sbxfs.8"});
  EXPECT_EQ(man.code, 0) << man.err;

  // The units: syntax and executables checked by systemd itself, with their
  // paths moved into the scratch root (they name the installed files).
  for (const std::string unit : {"sbxfs.service", "sbxfs@srv-sbx.service"}) {
    const std::string src = unit == "sbxfs.service" ? "sbxfs.service" : "sbxfs@.service";
    RunResult v = run("U=\"$T/" + unit + "\"; sed 's|" + prefix + "/bin/|" + root + prefix + "/bin/|' '" + root +
                      prefix + "/lib/systemd/system/" + src + "' > \"$U\" && "
                      "systemd-analyze verify --man=no \"$U\" 2>&1; ");
    EXPECT_EQ(v.code, 0) << unit << ": " << v.out << v.err;
    EXPECT_EQ(v.out, "") << unit << ": systemd-analyze has complaints:\n" << v.out;
    const std::string text = read_file(root + prefix + "/lib/systemd/system/" + src).data;
    for (const char* line : {"KillMode=process", "Delegate=yes", "Type=forking"})
      EXPECT_NE(text.find(line), std::string::npos) << src << " lacks " << line;
    // systemd learns the daemon's pid from the state directory's `pid` (a
    // guess fails once the daemon moved below the unit's cgroup); not from
    // `lock`, which systemd removes when the unit ends or fails.
    const std::size_t sd = text.find("--state-dir ");
    ASSERT_NE(sd, std::string::npos) << text;
    const std::size_t from = sd + std::string("--state-dir ").size();
    const std::string state = text.substr(from, text.find(' ', from) - from);
    EXPECT_NE(text.find("\nPIDFile=" + state + "/pid\n"), std::string::npos) << src << ":\n" << text;
  }
  const std::string main_unit = read_file(root + prefix + "/lib/systemd/system/sbxfs.service").data;
  EXPECT_NE(main_unit.find(prefix + "/bin/sbxfs --state-dir /var/lib/sbxfs /work/.sbx"), std::string::npos)
      << main_unit;

  // The installed daemon mounts a tree and runs commands under the installed
  // monitor (it looks for sbxfs-monitor beside itself).
  RunResult use = run("D=\"$T/root" + prefix + "/bin\"; M=\"$T/m3\"; mkdir -p \"$M\"; "
                      "\"$D/sbxfs\" --state-dir \"$T/s3\" \"$M\" || exit 1; "
                      "trap 'fusermount3 -u \"$M\"' EXIT; "
                      "exec 3<>\"$M/cmd\"; echo 'sleep 30' >&3; read -r id <&3; exec 3>&-; "
                      "mon=$(sed -n 's/.*\"monitorPid\": *\\([0-9]*\\).*/\\1/p' \"$T/s3/procs/$id/monitor.json\"); "
                      "readlink /proc/$mon/exe; echo > \"$M/procs/$id/stop\"; "
                      "grep -q '\"endReason\": \"stopped\"' \"$M/procs/$id/status.json\" && echo stopped",
                      40);
  EXPECT_EQ(use.code, 0) << use.out << use.err;
  EXPECT_NE(use.out.find(root + prefix + "/bin/sbxfs-monitor"), std::string::npos)
      << "the monitor beside the installed daemon: " << use.out << use.err;
  EXPECT_NE(use.out.find("stopped"), std::string::npos) << use.out << use.err;

  // Removal disables the enabled units (no link left to a unit that is
  // gone) and keeps the records; purge removes them, but not while a daemon
  // holds their lock. The scripts act on dpkg's root ($DPKG_ROOT).
  const std::string dpkg = "dpkg --root=\"$T/root\" --force-depends --force-script-chrootless ";
  // Enabled as systemctl does it (by hand where there is no systemctl).
  RunResult rm = run("R=\"$T/root\"; W=\"$R\"/etc/systemd/system/multi-user.target.wants; "
                     "if command -v systemctl >/dev/null; then "
                     "systemctl --root=\"$R\" enable sbxfs.service sbxfs@srv-sbx.service 2>/dev/null; "
                     "else mkdir -p \"$W\" && ln -s /lib/systemd/system/sbxfs.service \"$W\"/ && "
                     "ln -s /lib/systemd/system/sbxfs@.service \"$W\"/sbxfs@srv-sbx.service; fi; "
                     "ls \"$R\"/etc/systemd/system/multi-user.target.wants/; "
                     "mkdir -p \"$R\"/var/lib/sbxfs/procs/0001 && echo 1 > \"$R\"/var/lib/sbxfs/lock && " +
                     dpkg + "-r sbxfs >/dev/null && echo removed; "
                     "ls \"$R\"/etc/systemd/system/*.wants/ 2>/dev/null | grep sbxfs; "
                     "test -d \"$R\"/var/lib/sbxfs/procs/0001 && echo kept",
                     60);
  EXPECT_NE(rm.out.find("sbxfs@srv-sbx.service\n"), std::string::npos) << "enabled first: " << rm.out << rm.err;
  EXPECT_NE(rm.out.find("removed\nkept"), std::string::npos) << "links gone, records kept: " << rm.out << rm.err;
  RunResult held = run("R=\"$T/root\"; exec 9>>\"$R\"/var/lib/sbxfs/lock; flock 9; " + dpkg +
                           "-P sbxfs 2>&1; exec 9>&-; test -d \"$R\"/var/lib/sbxfs/procs/0001 && echo kept",
                       60);
  EXPECT_NE(held.out.find("kept: a daemon still uses"), std::string::npos) << held.out << held.err;
  EXPECT_NE(held.out.find("\nkept"), std::string::npos) << held.out << held.err;
  RunResult purge = run("R=\"$T/root\"; " + dpkg + "-i '" + pkg + "' >/dev/null && " + dpkg +
                            "-P sbxfs >/dev/null && test ! -e \"$R\"/var/lib/sbxfs && echo purged",
                        60);
  EXPECT_NE(purge.out.find("purged"), std::string::npos) << purge.out << purge.err;
}

}  // namespace
}  // namespace sbxit
