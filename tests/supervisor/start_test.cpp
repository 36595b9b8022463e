// Starting commands: what a started command sees (argv, env, secrets, cwd),
// what its record says, and that a failed start leaves nothing behind.
#include <stdlib.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include "supervisor/files.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::Errc;

class StartTest : public SupervisorTest {
 protected:
  // Starting `spec` fails with `code`, and nothing is created: no record, no
  // folder under STATE/procs, no process.
  void ExpectStartFails(const sup::StartSpec& spec, Errc code,
                        sup::StartMode mode = sup::StartMode::new_only) {
    const auto ids_before = ids_of(sup_->list());
    // A replaced record's folder on its way out is in STATE/staging, never in procs/.
    auto record_dirs = [&] { return dir_entries(procs_dir()); };
    const auto dirs_before = record_dirs();
    const auto procs_before = marked();
    auto r = sup_->start(spec, mode);
    ASSERT_FALSE(r.ok()) << "started " << r->bg_id << " pid " << r->pid;
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_FALSE(r.error().message.empty());
    EXPECT_EQ(ids_of(sup_->list()), ids_before);
    EXPECT_EQ(record_dirs(), dirs_before);
    auto procs_after = marked();
    std::sort(procs_after.begin(), procs_after.end());
    auto expected = procs_before;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(procs_after, expected) << pids_to_string(procs_after);
  }
};

TEST_F(StartTest, StateDirIsCreatedPrivate) {
  struct stat st;
  ASSERT_EQ(::stat(state_dir().c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto info = sup_->info();
  EXPECT_EQ(info.pid, ::getpid());
  EXPECT_FALSE(info.started_at.empty());
}

// procs/ carries the Orlov "top of hierarchy" flag (chattr +T), so each
// record's folder is placed in a block group of its own.
TEST_F(StartTest, RecordFoldersAreSpreadOnExt4) {
  TempDir probe("sbx-topdir");
  if (!sup::spread_subdirectories(probe.path())) GTEST_SKIP() << "no FS_TOPDIR_FL on this file system";
  int fd = ::open(procs_dir().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  int flags = 0;
  EXPECT_EQ(::ioctl(fd, FS_IOC_GETFLAGS, &flags), 0);
  ::close(fd);
  EXPECT_TRUE(flags & FS_TOPDIR_FL) << std::hex << flags;
}

TEST_F(StartTest, ReturnsRunningWithLivePid) {
  auto r = sup_->start(shell("sleep 30"));
  SBX_ASSERT_OK(r);
  const auto& st = r.value();
  EXPECT_FALSE(st.bg_id.empty());
  EXPECT_EQ(st.state, "running");
  EXPECT_TRUE(st.running);
  ASSERT_GT(st.pid, 0);
  EXPECT_TRUE(process_alive(st.pid));
  EXPECT_FALSE(st.started_at.empty());
  EXPECT_TRUE(st.finished_at.empty());
  EXPECT_FALSE(st.exit_code.has_value());
  EXPECT_EQ(st.cmd, "sleep 30");
  EXPECT_EQ(st.argv, (std::vector<std::string>{"/bin/sh", "-c", "sleep 30"}));
  EXPECT_EQ(st.cwd, work_.path());
  EXPECT_FALSE(st.log_file.empty());
  EXPECT_FALSE(st.error.has_value());
  // The record is there at once, in status() and list().
  auto s2 = sup_->status(st.bg_id);
  ASSERT_TRUE(s2.has_value());
  EXPECT_TRUE(s2->running);
  EXPECT_EQ(s2->pid, st.pid);
  EXPECT_EQ(ids_of(sup_->list()), std::vector<std::string>{st.bg_id});
  // started_at is ISO-8601 UTC with milliseconds.
  EXPECT_EQ(st.started_at.size(), std::string("2026-11-29T22:15:47.123Z").size()) << st.started_at;
  EXPECT_EQ(st.started_at.back(), 'Z');
  auto j = st.to_json();
  EXPECT_EQ(j.value("bgId", ""), st.bg_id);
  EXPECT_EQ(j.value("running", false), true);
  EXPECT_EQ(j.value("pid", 0), st.pid);
}

TEST_F(StartTest, ExitCodeIsRecorded) {
  auto r = sup_->start(shell("exit 3"));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, "exited");
  EXPECT_FALSE(st->running);
  EXPECT_EQ(st->exit_code, 3);
  EXPECT_EQ(st->end_reason, "exited");
  EXPECT_TRUE(st->signal.empty()) << st->signal;
  EXPECT_FALSE(st->timed_out);
  EXPECT_FALSE(st->finished_at.empty());
  EXPECT_GE(st->finished_at, st->started_at);
  auto j = st->to_json();
  EXPECT_EQ(j.value("exitCode", 0), 3);
  EXPECT_EQ(j.value("endReason", ""), "exited");
  EXPECT_EQ(j.value("state", ""), "exited");
}

TEST_F(StartTest, ExitZero) {
  auto r = sup_->start(argv({"/bin/true"}));
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_EQ(st->end_reason, "exited");
}

TEST_F(StartTest, ArgvRunsWithoutShell) {
  const std::vector<std::string> args = {"/bin/echo", "a  b", "$HOME", "*", "'q'"};
  auto r = sup_->start(argv(args));
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->argv, args);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_EQ(read_stream(st->stdout_file), "a  b $HOME * 'q'\n");
}

TEST_F(StartTest, ArgvRootIsTheProgramItself) {
  auto r = sup_->start(argv({"/bin/sleep", "30"}));
  SBX_ASSERT_OK(r);
  EXPECT_EQ(proc_cmdline(r->pid), std::string("/bin/sleep\0" "30\0", 14));
}

TEST_F(StartTest, EnvOverlay) {
  auto spec = shell("printf '%s|%s|%s' \"$FOO\" \"$HOME\" \"$PATH\"");
  spec.env["FOO"] = "bar baz";
  spec.env["HOME"] = "/nowhere";
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  const char* path = std::getenv("PATH");
  EXPECT_EQ(read_stream(st->stdout_file), std::string("bar baz|/nowhere|") + (path ? path : ""));
}

TEST_F(StartTest, SecretEnvIsSeenButMasked) {
  const std::string secret = "tok-s3cr3t-4711";
  auto spec = shell("printf '%s' \"$TOKEN\"; : " + secret);
  spec.secret_env["TOKEN"] = secret;
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  // The command sees the value; the raw file in the state dir is unchanged.
  EXPECT_EQ(read_stream(st->stdout_file), secret);
  // Everything shown is masked.
  EXPECT_EQ(st->cmd, "printf '%s' \"$TOKEN\"; : ****");
  EXPECT_EQ(st->cmd_full, "printf '%s' \"$TOKEN\"; : ****");
  EXPECT_EQ(st->argv, (std::vector<std::string>{"/bin/sh", "-c", "printf '%s' \"$TOKEN\"; : ****"}));
  EXPECT_EQ(st->to_json().dump().find(secret), std::string::npos) << st->to_json().dump();
  EXPECT_EQ(r->to_json().dump().find(secret), std::string::npos);
  EXPECT_EQ(sup_->mask("x " + secret + " y", st->bg_id), "x **** y");
  // mask() without an id knows only the global secrets (none here).
  EXPECT_EQ(sup_->mask("x " + secret + " y"), "x " + secret + " y");
}

TEST_F(StartTest, SecretInArgvIsMasked) {
  const std::string secret = "pw-98765-zz";
  auto spec = argv({"/bin/echo", secret, "--token=" + secret});
  spec.secret_env["PW"] = secret;
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->argv, (std::vector<std::string>{"/bin/echo", "****", "--token=****"}));
  EXPECT_EQ(r->cmd.find(secret), std::string::npos) << r->cmd;
  EXPECT_EQ(r->cmd_full.find(secret), std::string::npos) << r->cmd_full;
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(read_stream(st->stdout_file), secret + " --token=" + secret + "\n");
}

TEST_F(StartTest, CmdIsFirst120Chars) {
  std::string text = "echo ";
  while (text.size() < 300) text += "0123456789";
  auto r = sup_->start(shell(text));
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->cmd, text.substr(0, 120));
  EXPECT_EQ(r->cmd_full, text);
  ASSERT_TRUE(wait_ended(r->bg_id));
}

TEST_F(StartTest, CwdIsHonoured) {
  const std::string dir = work_ / "sub dir";
  fs::create_directories(dir);
  auto spec = shell("pwd -P");
  spec.cwd = dir;
  auto r = sup_->start(spec);
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->cwd, dir);
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(read_stream(st->stdout_file), fs::canonical(dir).string() + "\n");
}

TEST_F(StartTest, MissingCwdIsNotFound) {
  auto spec = shell("true");
  spec.cwd = work_ / "does-not-exist";
  ExpectStartFails(spec, Errc::not_found);
}

TEST_F(StartTest, CwdFileIsNotADirectory) {
  write_file(work_ / "a-file", "x");
  auto spec = shell("true");
  spec.cwd = work_ / "a-file";
  ExpectStartFails(spec, Errc::not_a_directory);
}

TEST_F(StartTest, MissingProgramIsNotFound) {
  ExpectStartFails(argv({work_ / "no-such-program"}), Errc::not_found);
  ExpectStartFails(argv({"/nonexistent/dir/prog", "x"}), Errc::not_found);
}

TEST_F(StartTest, NotExecutableIsPermissionDenied) {
  const std::string script = work_ / "script.sh";
  write_file(script, "#!/bin/sh\necho hi\n");
  ASSERT_EQ(::chmod(script.c_str(), 0644), 0);
  ExpectStartFails(argv({script}), Errc::permission_denied);
  ExpectStartFails(argv({work_.path()}), Errc::permission_denied);  // a directory
}

// execve refuses them (ENOEXEC); an argv start runs no shell in their place.
TEST_F(StartTest, NotAProgramIsRefusedWithoutAShell) {
  const std::string no_hashbang = work_ / "no-hashbang";
  write_file(no_hashbang, "touch '" + work_ / "ran" + "'\n");
  const std::string garbage = work_ / "garbage";
  write_file(garbage, "\x7f" "ELFgarbage");
  for (const std::string& p : {no_hashbang, garbage}) ASSERT_EQ(::chmod(p.c_str(), 0755), 0);
  ExpectStartFails(argv({no_hashbang}), Errc::not_a_program);
  ExpectStartFails(argv({garbage}), Errc::not_a_program);
  auto in_path = argv({"no-hashbang"});
  in_path.env["PATH"] = work_.path();
  ExpectStartFails(in_path, Errc::not_a_program);
  EXPECT_FALSE(std::filesystem::exists(work_ / "ran")) << "a shell ran the file";
}

TEST_F(StartTest, TakenNameIsAlreadyExists) {
  // argv, not a shell: dash forks `sleep` after start() returns, which
  // would change the process set that ExpectStartFails compares.
  auto first = sup_->start(argv({"sleep", "30"}, "dup"));
  SBX_ASSERT_OK(first);
  EXPECT_EQ(first->bg_id, "dup");
  EXPECT_TRUE(first->named);
  ExpectStartFails(shell("sleep 30", "dup"), Errc::already_exists);
  ExpectStartFails(argv({"/bin/true"}, "dup"), Errc::already_exists);
  // The first one is untouched.
  auto st = sup_->status("dup");
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->running);
  EXPECT_EQ(st->pid, first->pid);
  EXPECT_TRUE(process_alive(first->pid));
}

TEST_F(StartTest, EndedNameIsStillTakenForNewOnly) {
  auto first = sup_->start(shell("exit 0", "once"));
  SBX_ASSERT_OK(first);
  ASSERT_TRUE(wait_ended("once"));
  ExpectStartFails(shell("true", "once"), Errc::already_exists);
}

TEST_F(StartTest, InvalidSpecsAreRejected) {
  {
    SCOPED_TRACE("bad names");
    ExpectStartFails(shell("true", "a/b"), Errc::invalid_argument);
    ExpectStartFails(shell("true", ".."), Errc::invalid_argument);
  }
  {
    SCOPED_TRACE("neither argv nor shell");
    auto none = shell("true");
    none.shell.reset();
    ExpectStartFails(none, Errc::invalid_argument);
  }
  {
    SCOPED_TRACE("empty shell text");
    ExpectStartFails(shell(""), Errc::invalid_argument);
  }
  {
    SCOPED_TRACE("bad timeouts");
    auto t = shell("true");
    t.timeout_sec = 0;
    ExpectStartFails(t, Errc::invalid_argument);
    auto g = shell("true");
    g.stop_grace_sec = -1;
    ExpectStartFails(g, Errc::invalid_argument);
  }
}

// StartSpec: "exactly one of argv / shell".
TEST_F(StartTest, BothArgvAndShellIsInvalid) {
  auto both = argv({"/bin/echo", "from-argv"});
  both.shell = "echo from-shell";
  ExpectStartFails(both, Errc::invalid_argument);
}

TEST_F(StartTest, AutoIdsAreShortAndSortInStartOrder) {
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    auto r = sup_->start(argv({"/bin/true"}));
    SBX_ASSERT_OK(r);
    EXPECT_LE(r->bg_id.size(), 8u) << r->bg_id;
    SBX_EXPECT_OK(sup::validate_name(r->bg_id));
    ids.push_back(r->bg_id);
  }
  auto sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, ids);
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "duplicate id";
  EXPECT_EQ(ids_of(sup_->list()), ids);
  std::set<std::uint64_t> serials;
  for (const auto& c : sup_->list()) serials.insert(c.serial);
  EXPECT_EQ(serials.size(), ids.size()) << "serials are not unique";
  for (const auto& id : ids) ASSERT_TRUE(wait_ended(id));
}

// A record carries its id's serial (the inodes of its files are made of it):
// the listings, the snapshot and a reload agree, and a name keeps its serial
// when it is run again, from a slot or over an ended run.
TEST_F(StartTest, AnIdKeepsOneSerialInEveryListingAcrossReRunsAndAReload) {
  SBX_ASSERT_OK(sup_->create_slot("slotted", ::getuid(), 0));
  auto a = sup_->start(argv({"/bin/true"}));
  SBX_ASSERT_OK(a);
  SBX_ASSERT_OK(sup_->start(shell("true", "named")));
  ASSERT_TRUE(wait_ended(a->bg_id));
  ASSERT_TRUE(wait_ended("named"));
  auto serials = [&] {
    std::map<std::string, std::uint64_t> by_id;
    for (const auto& c : sup_->list()) by_id[c.bg_id] = c.serial;
    for (const auto& e : sup_->entries()) EXPECT_EQ(e.serial, by_id[e.bg_id]) << e.bg_id;
    for (const auto& e : sup_->ended_entries(std::nullopt)) EXPECT_EQ(e.serial, by_id[e.bg_id]) << e.bg_id;
    return by_id;
  };
  const auto before = serials();
  ASSERT_EQ(before.size(), 3u);
  std::set<std::uint64_t> distinct;
  for (const auto& [id, serial] : before) {
    EXPECT_NE(serial, 0u) << id;
    distinct.insert(serial);
  }
  EXPECT_EQ(distinct.size(), 3u);
  SBX_ASSERT_OK(sup_->start(shell("true", "slotted"), sup::StartMode::reuse_slot));
  SBX_ASSERT_OK(sup_->start(shell("true", "named"), sup::StartMode::reuse_slot));
  ASSERT_TRUE(wait_ended("slotted"));
  ASSERT_TRUE(wait_ended("named"));
  EXPECT_EQ(serials(), before) << "run again, a name keeps its serial";
  reopen();
  ASSERT_TRUE(sup_);
  const auto reloaded = serials();
  ASSERT_EQ(reloaded.size(), 3u);
  std::set<std::uint64_t> after;
  for (const auto& [id, serial] : reloaded) after.insert(serial);
  EXPECT_EQ(after.size(), 3u) << "distinct after a reload too";
  EXPECT_EQ(after.count(0), 0u);
}

// The listing generation changes whenever what entries() returns may have
// changed, and only then (the daemon lets the kernel keep a listing while
// it stays the same).
TEST_F(StartTest, TheListingGenerationChangesWithEveryRecordMadeOrRemovedOnly) {
  std::uint64_t seen = 0;
  const auto listed = sup_->entries(&seen);
  EXPECT_TRUE(listed.empty());
  EXPECT_EQ(seen, sup_->listing_generation());
  auto changed = [&] {
    const std::uint64_t now = sup_->listing_generation();
    const bool moved = now != seen;
    seen = now;
    return moved;
  };
  SBX_ASSERT_OK(sup_->create_slot("slot", ::getuid(), 0));
  EXPECT_TRUE(changed()) << "an empty slot";
  auto a = sup_->start(shell("exit 3"));
  SBX_ASSERT_OK(a);
  EXPECT_TRUE(changed()) << "a start";
  ASSERT_TRUE(wait_ended(a->bg_id));
  EXPECT_FALSE(changed()) << "an end changes no listing";
  (void)sup_->status(a->bg_id);
  (void)sup_->list();
  EXPECT_FALSE(changed()) << "reads change nothing";
  SBX_ASSERT_OK(sup_->start(shell("true", "slot"), sup::StartMode::reuse_slot));
  EXPECT_TRUE(changed()) << "a slot's first run (logs/ lists it now)";
  ASSERT_TRUE(wait_ended("slot"));
  SBX_ASSERT_OK(sup_->remove(a->bg_id));
  EXPECT_TRUE(changed()) << "a removal";
  std::uint64_t with = 0;
  EXPECT_EQ(sup_->entries(&with).size(), 1u);
  EXPECT_EQ(with, seen);
  reopen();
  ASSERT_TRUE(sup_);
  EXPECT_EQ(sup_->entries().size(), 1u);
}

TEST_F(StartTest, RecordFolderFollowsFormat) {
  auto r = sup_->start(shell("echo out; echo err >&2", "fmt"));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_ended("fmt"));
  const std::string dir = record_dir("fmt");
  auto spec = read_json(dir + "/spec.json");
  ASSERT_TRUE(spec) << read_file(dir + "/spec.json");
  EXPECT_EQ(spec->value("bgId", ""), "fmt");
  EXPECT_EQ(spec->value("shell", ""), "echo out; echo err >&2");
  auto mon = read_json(dir + "/monitor.json");
  ASSERT_TRUE(mon) << read_file(dir + "/monitor.json");
  EXPECT_EQ(mon->value("pid", 0), r->pid);
  EXPECT_TRUE(mon->contains("monitorPid"));
  auto ex = read_json(dir + "/exit.json");
  ASSERT_TRUE(ex) << read_file(dir + "/exit.json");
  EXPECT_EQ(ex->value("exitCode", -2), 0);
  EXPECT_EQ(ex->value("endReason", ""), "exited");
  EXPECT_EQ(read_stream(dir + "/stdout"), "out\n");
  EXPECT_EQ(read_stream(dir + "/stderr"), "err\n");
  EXPECT_FALSE(file_exists(state_dir() + "/staging/new-fmt"));
}

// ---- named slots, reuse and remove -------------------------------------------

TEST_F(StartTest, NamedSlotIsFilledByReuseSlot) {
  auto slot = sup_->create_slot("web", ::getuid(), ::getsid(0));
  SBX_ASSERT_OK(slot);
  EXPECT_EQ(slot->state, "empty");
  EXPECT_FALSE(slot->running);
  EXPECT_TRUE(slot->named);
  ExpectStartFails(shell("sleep 30", "web"), Errc::already_exists, sup::StartMode::new_only);
  auto r = sup_->start(argv({"sleep", "30"}, "web"), sup::StartMode::reuse_slot);  // no shell: see TakenName
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->bg_id, "web");
  EXPECT_TRUE(r->running);
  // Running: busy, even for reuse_slot.
  ExpectStartFails(shell("true", "web"), Errc::busy, sup::StartMode::reuse_slot);
  auto stopped = sup_->stop_and_wait("web", 10000ms);
  ASSERT_TRUE(stopped);
  ASSERT_FALSE(stopped->running);
  // Ended: replaced.
  auto again = sup_->start(shell("exit 9", "web"), sup::StartMode::reuse_slot);
  SBX_ASSERT_OK(again);
  EXPECT_NE(again->pid, r->pid);
  auto st = wait_ended("web");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 9);
  EXPECT_EQ(ids_of(sup_->list()), std::vector<std::string>{"web"});
}

TEST_F(StartTest, CreateSlotTwiceIsAlreadyExists) {
  SBX_ASSERT_OK(sup_->create_slot("s1", ::getuid(), ::getsid(0)));
  auto r = sup_->create_slot("s1", ::getuid(), ::getsid(0));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::already_exists);
  auto bad = sup_->create_slot("a/b", ::getuid(), ::getsid(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::invalid_argument);
}

TEST_F(StartTest, RemoveEndedAndBusyWhileRunning) {
  auto run = sup_->start(shell("sleep 30", "running"));
  SBX_ASSERT_OK(run);
  auto busy = sup_->remove("running");
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.error().code, Errc::busy);
  EXPECT_TRUE(sup_->status("running").has_value());

  auto done = sup_->start(shell("echo bye", "done"));
  SBX_ASSERT_OK(done);
  ASSERT_TRUE(wait_ended("done"));
  SBX_ASSERT_OK(sup_->remove("done"));
  EXPECT_FALSE(sup_->status("done").has_value());
  EXPECT_EQ(ids_of(sup_->list()), std::vector<std::string>{"running"});
  EXPECT_FALSE(file_exists(record_dir("done")));

  auto missing = sup_->remove("done");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::not_found);
}

}  // namespace

namespace sbxtest {
namespace {

TEST_F(SupervisorTest, ListRunningCountsTheRest) {
  auto a = sup_->start(shell("sleep 30"));
  auto b = sup_->start(shell("true"));
  SBX_ASSERT_OK(a);
  SBX_ASSERT_OK(b);
  ASSERT_TRUE(wait_ended(b->bg_id));
  SBX_ASSERT_OK(sup_->create_slot("empty-slot", ::getuid(), ::getsid(0)));
  std::size_t others = 99;
  auto running = sup_->list_running(&others);
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].bg_id, a->bg_id);
  EXPECT_TRUE(running[0].running);
  EXPECT_EQ(others, 1u);  // the ended one; the empty slot is not counted
}

// list_running() walks only the records that may still run (LiveRecords):
// after every kind of change to the table it agrees with the whole table.
TEST_F(SupervisorTest, ListRunningAgreesWithTheWholeTable) {
  const auto agree = [&](const char* when) {
    SCOPED_TRACE(when);
    std::vector<std::string> want;
    std::size_t ended = 0;
    for (const sup::CommandStatus& st : sup_->list()) {
      if (st.state == "empty") continue;
      if (st.state == "exited" || st.state == "error") ++ended;
      else want.push_back(st.bg_id);
    }
    std::size_t all = 99, mine = 99, theirs = 99;
    EXPECT_EQ(ids_of(sup_->list_running(&all)), want);
    EXPECT_EQ(all, ended);
    EXPECT_EQ(ids_of(sup_->list_running(&mine, ::getuid())), want);
    EXPECT_EQ(mine, ended);
    EXPECT_TRUE(sup_->list_running(&theirs, ::getuid() + 1).empty());
    EXPECT_EQ(theirs, 0u);
  };
  const auto stop = [&](const std::string& id) {
    SBX_EXPECT_OK(sup_->stop(id));
    EXPECT_TRUE(wait_ended(id));
  };
  agree("an empty table");
  auto a = sup_->start(shell("sleep 30"));
  auto b = sup_->start(shell("true"));
  SBX_ASSERT_OK(a);
  SBX_ASSERT_OK(b);
  ASSERT_TRUE(wait_ended(b->bg_id));
  agree("one running, one ended");
  SBX_ASSERT_OK(sup_->create_slot("slot", ::getuid(), ::getsid(0)));
  agree("an empty slot");
  SBX_ASSERT_OK(sup_->start(shell("sleep 30", "slot"), sup::StartMode::reuse_slot));
  agree("the slot runs");
  stop("slot");
  agree("the slot's run ended");
  SBX_ASSERT_OK(sup_->start(shell("sleep 30", "slot"), sup::StartMode::reuse_slot));
  agree("the slot runs again");
  stop("slot");
  // Past the checks, refused by the kernel's exec: the ended run comes back.
  const std::string bad = work_ / "not-a-program";
  write_file(bad, "\x7f" "ELF, but no program");
  ASSERT_EQ(::chmod(bad.c_str(), 0755), 0);
  EXPECT_FALSE(sup_->start(argv({bad}, "slot"), sup::StartMode::reuse_slot).ok());
  const auto back = sup_->status("slot");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->state, "exited");
  agree("a failed re-run gave the ended record back");
  SBX_ASSERT_OK(sup_->remove(b->bg_id));
  agree("an ended record removed");
  auto c = sup_->start(shell("sleep 30"));
  SBX_ASSERT_OK(c);
  stop(a->bg_id);
  reopen();
  agree("after a reload");
  stop(c->bg_id);
  agree("the last one stopped after the reload");
}

TEST_F(SupervisorTest, RemovedHighestIdIsNotReused) {
  auto a = sup_->start(shell("true"));
  SBX_ASSERT_OK(a);
  ASSERT_TRUE(wait_ended(a->bg_id));
  SBX_ASSERT_OK(sup_->remove(a->bg_id));
  reopen();
  auto b = sup_->start(shell("true"));
  SBX_ASSERT_OK(b);
  EXPECT_GT(b->bg_id, a->bg_id);
}

}  // namespace
}  // namespace sbxtest
