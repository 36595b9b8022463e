// procs/: named slots (mkdir), procs/ID/cmd, restarting a named command, rmdir.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using ProcsDirTest = SbxfsTest;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST_F(ProcsDirTest, MkdirMakesAnEmptySlot) {
  auto r = run("mkdir \"$MNT/procs/web\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(procs(), "web"));
  struct stat st;
  ASSERT_EQ(::stat(p("procs/web").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  auto names = list_dir(p("procs/web"));
  for (const char* f : {"cmd", "status.json", "wait"})
    EXPECT_TRUE(contains(names, f)) << f << " missing from an empty slot";
  EXPECT_EQ(file("procs/web/cmd"), "") << "an empty slot's cmd reads empty";
  EXPECT_EQ(file("procs/web/events"), "") << "nothing ran, nothing ended: no event";
  auto s = status_json("web");
  EXPECT_EQ(s["bgId"], "web");
  EXPECT_EQ(s["state"], "empty");
  EXPECT_EQ(s["running"], false);
  // The root status counts neither running nor finished.
  auto root = root_status();
  EXPECT_EQ(root["procs"], json::array());
  EXPECT_EQ(root["finished"], 0);
}

TEST_F(ProcsDirTest, MkdirWriteCmdReadWait) {
  auto r = run(R"(mkdir "$MNT/procs/job" && echo 'echo in slot; exit 6' > "$MNT/procs/job/cmd" && cat "$MNT/procs/job/wait")");
  ASSERT_EQ(r.code, 0) << r.err;
  auto w = parse_json(r.out);
  ASSERT_TRUE(w.is_object()) << r.out;
  EXPECT_EQ(w["stillRunning"], false);
  EXPECT_EQ(w["proc"]["bgId"], "job");
  EXPECT_EQ(w["proc"]["exitCode"], 6);
  EXPECT_EQ(w["proc"]["logTail"], "in slot\n");
  EXPECT_EQ(file("procs/job/cmd"), "echo in slot; exit 6\n");
  EXPECT_EQ(file("logs/job.log"), "in slot\n");
}

TEST_F(ProcsDirTest, SlotCmdReadBack) {
  ASSERT_EQ(mkdir_errno(p("procs/rb")), 0);
  auto r = run(R"(exec 3<>"$MNT/procs/rb/cmd"; echo true >&3; read -r id <&3; echo "$id")");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "rb\n");
}

// procs/NAME/cmd held open across `rmdir procs/NAME`: a write there has no
// slot to run in, and brings back neither the name nor an automatic id.
TEST_F(ProcsDirTest, ACmdHeldAcrossTheRmdirOfItsRecordStartsNothing) {
  ASSERT_EQ(mkdir_errno(p("procs/gone")), 0);
  const std::string auto_id = start("true");
  ASSERT_TRUE(is_auto_id(auto_id));
  wait_json(auto_id);
  auto r = bash(R"(exec 5<>"$MNT/procs/gone/cmd" 6<>"$MNT/procs/$ID/cmd" || exit 90
rmdir "$MNT/procs/gone" "$MNT/procs/$ID" || exit 91
echo 'echo back' >&5; echo "rc=$?"
echo 'echo back' >&6; echo "rc=$?")",
                20, {{"ID", auto_id}});
  EXPECT_EQ(r.out, "rc=1\nrc=1\n") << r.err;
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  EXPECT_TRUE(procs().empty()) << ::testing::PrintToString(procs());
  EXPECT_EQ(stat_errno(state_ + "/procs/gone"), ENOENT);
}

// A folder removed while a file of it is held open, then made again: the
// new one is another folder (another inode), readable at once.
TEST_F(ProcsDirTest, AFolderMadeAgainWhileTheRemovedOnesFileIsHeldIsReadable) {
  auto r = bash(R"(mkdir "$MNT/procs/again" && exec 5<>"$MNT/procs/again/cmd" && rmdir "$MNT/procs/again" &&
mkdir "$MNT/procs/again" && cat "$MNT/procs/again/status.json" >/dev/null && echo "id -u" > "$MNT/procs/again/cmd" &&
cat "$MNT/procs/again/wait" > /dev/null && cat "$MNT/procs/again/log")");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, std::to_string(::getuid()) + "\n") << r.err;
}

TEST_F(ProcsDirTest, JsonInSlotCmdWithMatchingName) {
  ASSERT_EQ(mkdir_errno(p("procs/js")), 0);
  EXPECT_EQ(write_file(p("procs/js/cmd"), R"({"cmd": "echo json slot", "name": "js", "note": "n"})"), 0);
  auto w = wait_json("js");
  EXPECT_EQ(w["proc"]["note"], "n");
  EXPECT_EQ(w["proc"]["logTail"], "json slot\n");
}

TEST_F(ProcsDirTest, MismatchedNameInSlotCmdIsRejected) {
  ASSERT_EQ(mkdir_errno(p("procs/slotA")), 0);
  EXPECT_EQ(write_file(p("procs/slotA/cmd"), R"({"cmd": "true", "name": "slotB"})" "\n"), EINVAL);
  EXPECT_EQ(status_json("slotA")["state"], "empty");
  EXPECT_FALSE(contains(procs(), "slotB"));
}

TEST_F(ProcsDirTest, WritingCmdOfAnEndedNamedCommandStartsItAgain) {
  std::string id = start(R"({"cmd": "echo first; exit 1", "name": "again"})");
  ASSERT_EQ(id, "again");
  auto w1 = wait_json(id);
  EXPECT_EQ(w1["proc"]["exitCode"], 1);
  pid_t pid1 = w1["proc"]["pid"].get<pid_t>();
  auto r = run("echo 'echo second' > \"$MNT/procs/again/cmd\"");
  ASSERT_EQ(r.code, 0) << r.err;
  auto w2 = wait_json(id);
  EXPECT_EQ(w2["proc"]["exitCode"], 0);
  EXPECT_EQ(w2["proc"]["cmd"], "echo second");
  EXPECT_NE(w2["proc"]["pid"].get<pid_t>(), pid1);
  EXPECT_EQ(log(id), "second\n") << "the old log is replaced";
  EXPECT_EQ(file("logs/again.log"), "second\n");
  EXPECT_EQ(file("procs/again/stdout"), "second\n");
  auto names = procs();
  EXPECT_EQ(std::count(names.begin(), names.end(), "again"), 1);
}

TEST_F(ProcsDirTest, ARunAgainThatCannotExecKeepsTheRecordItWasToReplace) {
  std::string id = start(R"({"cmd": "echo first; exit 3", "name": "kept"})");
  ASSERT_EQ(id, "kept");
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 3);
  // Executable, but its interpreter does not exist: execve fails after the
  // new run was listed, and the start is refused.
  const std::string script = dir_ + "/bad-interpreter.sh";
  ASSERT_EQ(write_file(script, "#!/nonexistent/interpreter\necho never\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  auto r = run("echo '{\"argv\": [\"" + script + "\"]}' > \"$MNT/procs/kept/cmd\"");
  EXPECT_NE(r.code, 0);
  const std::vector<json> errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "ENOENT") << errs.back().dump();
  // The first run's record is still there, whole.
  const json s = status_json(id);
  EXPECT_EQ(s["state"], "exited") << s.dump();
  EXPECT_EQ(s["exitCode"], 3);
  EXPECT_EQ(s["cmd"], "echo first; exit 3");
  EXPECT_EQ(log(id), "first\n");
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 3);
  // Still after a restart of the daemon: it is on disk too.
  ASSERT_TRUE(restart_daemon());
  EXPECT_EQ(status_json(id)["exitCode"], 3);
  EXPECT_EQ(log(id), "first\n");
  // And it runs again with a command that can.
  r = run("echo 'echo second' > \"$MNT/procs/kept/cmd\"");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(wait_json(id)["proc"]["exitCode"], 0);
  EXPECT_EQ(log(id), "second\n");
}

TEST_F(ProcsDirTest, WritingCmdOfARunningCommandIsEBUSY) {
  std::string id = start(R"({"cmd": "sleep 30", "name": "busy"})");
  ASSERT_EQ(id, "busy");
  pid_t pid = status_json(id)["pid"].get<pid_t>();
  auto r = bash("echo 'echo other' > \"$MNT/procs/busy/cmd\"");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("Device or resource busy"), std::string::npos) << r.err;
  auto s = status_json(id);
  EXPECT_EQ(s["pid"], pid);
  EXPECT_EQ(s["cmd"], "sleep 30");
  auto errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "EBUSY");
  EXPECT_EQ(errs.back()["path"], "procs/busy/cmd");
}

TEST_F(ProcsDirTest, MkdirOfATakenNameIsEEXIST) {
  ASSERT_EQ(mkdir_errno(p("procs/dup")), 0);
  EXPECT_EQ(mkdir_errno(p("procs/dup")), EEXIST);
  std::string id = start("true");
  EXPECT_EQ(mkdir_errno(p("procs/" + id)), EEXIST);
  // A name taken by a slot cannot be used by a request on the root cmd.
  EXPECT_EQ(write_file(p("cmd"), R"({"cmd": "true", "name": "dup"})" "\n"), EEXIST);
}

TEST_F(ProcsDirTest, MkdirOfABadNameIsEINVAL) {
  auto before = procs();
  EXPECT_EQ(mkdir_errno(p("procs/a b")), EINVAL);
  EXPECT_EQ(mkdir_errno(p("procs/" + std::string(65, 'x'))), ENAMETOOLONG);
  EXPECT_EQ(mkdir_errno(p("procs/semi;colon")), EINVAL);
  EXPECT_EQ(procs(), before);
  auto errs = errors();
  ASSERT_FALSE(errs.empty());
  EXPECT_EQ(errs.back()["errno"], "EINVAL");
  EXPECT_NE(errs.back()["path"].get<std::string>().find("mkdir"), std::string::npos) << errs.back().dump();
}

TEST_F(ProcsDirTest, RmdirRemovesAnEndedCommand) {
  std::string id = start("echo bye");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  auto r = run("rmdir \"$MNT/procs/$ID\"", 10, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(contains(procs(), id));
  EXPECT_EQ(stat_errno(p("procs/" + id)), ENOENT);
  EXPECT_EQ(stat_errno(p("logs/" + id + ".log")), ENOENT);
  EXPECT_FALSE(contains(list_dir(p("logs")), id + ".log"));
  EXPECT_EQ(stat_errno(state_ + "/procs/" + id), ENOENT) << "record and logs removed from the state dir";
  EXPECT_EQ(root_status()["finished"], 0);
  // Ids are never reused.
  std::string next = start("true");
  EXPECT_GT(next, id);
}

TEST_F(ProcsDirTest, RmdirOfARunningCommandIsEBUSY) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(rmdir_errno(p("procs/" + id)), EBUSY);
  EXPECT_TRUE(contains(procs(), id));
  EXPECT_EQ(status_json(id)["running"], true);
}

TEST_F(ProcsDirTest, RmdirOfAnEmptySlotAndOfANamedCommand) {
  ASSERT_EQ(mkdir_errno(p("procs/tmpslot")), 0);
  EXPECT_EQ(rmdir_errno(p("procs/tmpslot")), 0);
  EXPECT_FALSE(contains(procs(), "tmpslot"));
  std::string id = start(R"({"cmd": "true", "name": "named1"})");
  wait_ended(id);
  EXPECT_EQ(rmdir_errno(p("procs/named1")), 0);
  EXPECT_FALSE(contains(procs(), "named1"));
  // The name is free again.
  EXPECT_EQ(mkdir_errno(p("procs/named1")), 0);
}

// Link counts of the folders as find(1) reads them: the root holds two
// folders; procs/ says "not counted" (1), never "no folders in it" (2);
// and find finds every record's files.
TEST_F(ProcsDirTest, FolderLinkCountsLeadFindIntoEveryRecord) {
  for (const char* req : {"true", "true", "true"}) ASSERT_FALSE(start(req).empty());
  ASSERT_EQ(mkdir_errno(p("procs/slot")), 0);
  const RunResult r = run("stat -c %h \"$MNT\" \"$MNT/procs\" \"$MNT/logs\" \"$MNT/procs/slot\"; "
                          "find \"$MNT\" -name cmd | wc -l");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "4\n1\n2\n2\n5\n");  // the root's cmd and the four records'
}

// procs/ and logs/ date from their last change, as folders do: a script
// polling their mtime sees a new record (within the second the kernel
// keeps their attributes).
TEST_F(ProcsDirTest, ProcsAndLogsDateFromTheLastRecordMadeOrRemoved) {
  auto mtimes = [&] {
    struct stat a {}, b {};
    EXPECT_EQ(::stat(p("procs").c_str(), &a), 0);
    EXPECT_EQ(::stat(p("logs").c_str(), &b), 0);
    return std::pair{a.st_mtim.tv_sec * 1000000000LL + a.st_mtim.tv_nsec, b.st_mtim.tv_sec * 1000000000LL + b.st_mtim.tv_nsec};
  };
  const auto before = mtimes();
  const std::string id = start("true");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return mtimes().first > before.first && mtimes().second > before.second; }, 5s));
  const auto made = mtimes();
  wait_ended(id);
  ASSERT_EQ(rmdir_errno(p("procs/" + id)), 0);
  EXPECT_TRUE(wait_until([&] { return mtimes().first > made.first; }, 5s));
}

// A file of known size counts the blocks it would take, as du(1) reads them.
TEST_F(ProcsDirTest, FilesCountTheirBlocks) {
  const RunResult r = run("stat -c '%s %b' \"$MNT/README\"; du -k \"$MNT/README\" | cut -f1");
  ASSERT_EQ(r.code, 0) << r.err;
  long long size = 0, blocks = 0, kib = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str(), "%lld %lld %lld", &size, &blocks, &kib), 3) << r.out;
  EXPECT_GT(size, 0);
  EXPECT_EQ(blocks, (size + 511) / 512);
  EXPECT_GT(kib, 0);
}

// Computed files and write-only ones show size 0 (read to end of file like
// /proc's); the computed ones still have content.
TEST_F(ProcsDirTest, ComputedAndWriteOnlyFilesShowSizeZero) {
  const std::string id = start("echo hi");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  const RunResult r = run(
      "cd \"$MNT\" && stat -c %s cmd status.json errors steps.json && cd procs/" + id +
      " && stat -c %s cmd status.json steps.json tail wait ready output events steps stop signal stdin && "
      "cat status.json steps.json tail wait output events | wc -c");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string zeros = [] {
    std::string z;
    for (int i = 0; i < 16; ++i) z += "0\n";
    return z;
  }();
  ASSERT_GT(r.out.size(), zeros.size());
  EXPECT_EQ(r.out.substr(0, zeros.size()), zeros) << r.out;
  EXPECT_GT(std::stoll(r.out.substr(zeros.size())), 100) << r.out;
}

}  // namespace
}  // namespace sbxit
