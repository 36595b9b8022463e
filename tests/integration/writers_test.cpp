// Every ordinary writer works: scratch files renamed over the tree's files
// (Python tempfile + os.replace, sed -i, the agents' `.cmd.<hex>.tmp` + mv,
// rsync, vim), empty writes, record names, and the tree's other name ops.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

const std::vector<std::string> kRootNames = {"README", "cmd", "status.json", "steps.json", "errors", "procs", "logs"};

/// Puts `content` into the tree's file `path` the way one client does.
using Writer = std::function<RunResult(const std::string& path, const std::string& content)>;

class WritersTest : public SbxfsTest {
 protected:
  /// What a failed write or rename says, for the test's message.
  static std::string said(const RunResult& r) { return "rc=" + std::to_string(r.code) + " out=" + r.out + " err=" + r.err; }

  std::vector<std::string> sorted(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  }

  /// The folder holds the tree's names and nothing else (no scratch left).
  void expect_no_scratch(const std::string& rel) {
    std::vector<std::string> names = list_dir(p(rel));
    std::vector<std::string> want = kRootNames;
    if (!rel.empty())
      want = {"cmd", "status.json", "log", "stdout", "stderr", "tail", "wait", "ready", "output", "steps",
              "steps.json", "stop", "signal", "events", "stdin"};
    EXPECT_EQ(sorted(names), sorted(want)) << "in /" << rel;
  }

  /// The one record that is in procs/ now and was not in `before`.
  std::string new_record(const std::vector<std::string>& before) {
    std::vector<std::string> fresh;
    for (const std::string& id : procs())
      if (std::find(before.begin(), before.end(), id) == before.end()) fresh.push_back(id);
    EXPECT_EQ(fresh.size(), 1u) << "new records: " << fresh.size();
    return fresh.empty() ? "" : fresh[0];
  }

  /// `client` writes, through `w`, to cmd, procs/NAME/cmd, stop and signal;
  /// each has its effect and leaves no scratch behind.
  void drives_all_four(const std::string& client, const Writer& w) {
    SCOPED_TRACE(client);
    // cmd: a new command.
    const std::vector<std::string> before = procs();
    RunResult r = w(p("cmd"), "echo " + client + "-root\n");
    ASSERT_EQ(r.code, 0) << said(r);
    const std::string id = new_record(before);
    ASSERT_FALSE(id.empty());
    wait_ended(id);
    EXPECT_EQ(log(id), client + "-root\n");
    expect_no_scratch("");

    // procs/NAME/cmd: a command in that slot.
    const std::string slot = client + "-slot";
    ASSERT_EQ(mkdir_errno(p("procs/" + slot)), 0);
    r = w(p("procs/" + slot + "/cmd"), "echo " + client + "-slot\n");
    ASSERT_EQ(r.code, 0) << said(r);
    wait_ended(slot);
    EXPECT_EQ(log(slot), client + "-slot\n");
    expect_no_scratch("procs/" + slot);

    // stop: the command has ended when the writer is done.
    const std::string stopped = start("sleep 30");
    ASSERT_FALSE(stopped.empty());
    r = w(p("procs/" + stopped + "/stop"), "\n");
    ASSERT_EQ(r.code, 0) << said(r);
    json st = status_json(stopped);
    EXPECT_EQ(st["running"], false);
    EXPECT_EQ(st["endReason"], "stopped");
    expect_no_scratch("procs/" + stopped);

    // signal: TERM reaches it.
    const std::string signalled = start("sleep 30");
    ASSERT_FALSE(signalled.empty());
    r = w(p("procs/" + signalled + "/signal"), "TERM\n");
    ASSERT_EQ(r.code, 0) << said(r);
    st = wait_ended(signalled);
    EXPECT_EQ(st["signal"], "SIGTERM");
    expect_no_scratch("procs/" + signalled);
  }

  std::size_t error_count() { return errors().size(); }
};

// ---- the clients ------------------------------------------------------------

TEST_F(WritersTest, PythonTempfileAndOsReplace) {
  drives_all_four("py", [&](const std::string& path, const std::string& content) {
    return run_argv({python_path(), "-c",
                     "import os, sys, tempfile\n"
                     "path, content = sys.argv[1], sys.argv[2]\n"
                     "fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))\n"
                     "os.write(fd, content.encode())\n"
                     "os.close(fd)\n"
                     "os.replace(tmp, path)\n",
                     path, content});
  });
}

TEST_F(WritersTest, AgentsTempFileAndMv) {
  drives_all_four("agent", [&](const std::string& path, const std::string& content) {
    const std::string dir = path.substr(0, path.rfind('/'));
    const std::string base = path.substr(path.rfind('/') + 1);
    const std::string tmp = dir + "/." + base + ".1a55c698b3e54c87983066848b4c03ce.tmp";
    return run("printf '%s' \"$CONTENT\" | sh -c 'cat > \"$TMP\"' && mv \"$TMP\" \"$DEST\"", 20,
               {{"CONTENT", content}, {"TMP", tmp}, {"DEST", path}});
  });
}

TEST_F(WritersTest, Rsync) {
  drives_all_four("rsync", [&](const std::string& path, const std::string& content) {
    const std::string src = dir_ + "/rsync-src";
    EXPECT_EQ(write_file(src, content, O_WRONLY | O_CREAT | O_TRUNC), 0);
    return run_argv({"rsync", src, path});
  });
}

TEST_F(WritersTest, VimWritesTheFile) {
  // `:wq!`: stop and signal are write-only, so vim could not read them and
  // marks the buffer read-only; the content is the one line set here.
  drives_all_four("vim", [&](const std::string& path, const std::string& content) {
    std::string line = content;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return run_argv({"vim", "-es", "-u", "NONE", "-i", "NONE", "+%d", "+call setline(1, $LINE)", "+wq!", path}, 20,
                    {{"LINE", line}});
  });
}

TEST_F(WritersTest, SedInPlace) {
  // sed reads the file first: cmd shows its usage text, procs/ID/cmd the command.
  const std::vector<std::string> before = procs();
  RunResult r = run("sed -i '1,$c echo sed-root' \"$MNT/cmd\"");
  ASSERT_EQ(r.code, 0) << said(r);
  const std::string id = new_record(before);
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  EXPECT_EQ(log(id), "sed-root\n");
  expect_no_scratch("");

  ASSERT_EQ(mkdir_errno(p("procs/sed-slot")), 0);
  ASSERT_EQ(write_file(p("procs/sed-slot/cmd"), "echo one\n"), 0);
  wait_ended("sed-slot");
  r = run("sed -i 's/one/two/' \"$MNT/procs/sed-slot/cmd\"");
  ASSERT_EQ(r.code, 0) << said(r);
  wait_ended("sed-slot");
  EXPECT_EQ(log("sed-slot"), "two\n");
  EXPECT_EQ(file("procs/sed-slot/cmd"), "echo two\n");
  expect_no_scratch("procs/sed-slot");

  // stop and signal are write-only: sed cannot read them, and leaves nothing.
  const std::string running = start("sleep 30");
  ASSERT_FALSE(running.empty());
  for (const std::string f : {"stop", "signal"}) {
    r = run("sed -i 's/x/TERM/' \"$MNT/procs/$ID/" + f + "\"", 20, {{"ID", running}});
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
  }
  EXPECT_EQ(status_json(running)["running"], true);
  expect_no_scratch("procs/" + running);
}

TEST_F(WritersTest, ARenameBeforeTheCloseDeliversAtTheClose) {
  // Python's NamedTemporaryFile renamed inside its `with`: the text is still
  // in Python's buffer at the rename, and all of it lands at the close.
  const std::string script =
      "import os, sys, tempfile\n"
      "dest = sys.argv[1]\n"
      "with tempfile.NamedTemporaryFile('w', dir=os.path.dirname(dest), delete=False) as f:\n"
      "    f.write(sys.argv[2])\n"
      "    f.flush()\n"
      "    os.replace(f.name, dest)\n"
      "    f.write(sys.argv[3])\n";
  const std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  RunResult r = run_argv({python_path(), "-c", script, p("procs/" + id + "/signal"), "", "HUP\n"});
  ASSERT_EQ(r.code, 0) << said(r);
  EXPECT_EQ(wait_ended(id)["signal"], "SIGHUP");
  expect_no_scratch("procs/" + id);

  // cmd: the whole script, the part written before the rename and after it.
  const std::vector<std::string> before = procs();
  r = run_argv({python_path(), "-c", script, p("cmd"), "echo one\n", "echo two\n"});
  ASSERT_EQ(r.code, 0) << said(r);
  const std::string started = new_record(before);
  ASSERT_FALSE(started.empty());
  wait_ended(started);
  EXPECT_EQ(log(started), "one\ntwo\n");
  expect_no_scratch("");

  // A refusal then has only errors to go to.
  const std::string other = start("sleep 30");
  ASSERT_FALSE(other.empty());
  const std::size_t errors_before = error_count();
  r = run_argv({python_path(), "-c", script, p("procs/" + other + "/signal"), "", "NOPE\n"});
  ASSERT_EQ(r.code, 0) << said(r);
  std::vector<json> errs = errors();
  ASSERT_EQ(errs.size(), errors_before + 1);
  EXPECT_EQ(errs.back()["path"], "procs/" + other + "/signal");
  EXPECT_EQ(errs.back()["errno"], "EINVAL");
  EXPECT_EQ(status_json(other)["running"], true);
  expect_no_scratch("procs/" + other);
}

// ---- refusals through rename ----------------------------------------------

TEST_F(WritersTest, RefusedRequestFailsTheRename) {
  const std::vector<std::string> before = procs();
  const std::size_t errors_before = error_count();
  RunResult r = run_argv({python_path(), "-c",
                          "import errno, os, tempfile\n"
                          "fd, tmp = tempfile.mkstemp(dir=os.environ['MNT'])\n"
                          "os.write(fd, b'{\"cmd\": 5}')\n"
                          "os.close(fd)\n"
                          "try:\n"
                          "    os.replace(tmp, os.environ['MNT'] + '/cmd')\n"
                          "except OSError as e:\n"
                          "    print(errno.errorcode[e.errno])\n"});
  ASSERT_EQ(r.code, 0) << said(r);
  EXPECT_EQ(r.out, "EINVAL\n");
  EXPECT_EQ(procs(), before) << "no record";
  expect_no_scratch("");
  std::vector<json> errs = errors();
  ASSERT_EQ(errs.size(), errors_before + 1);
  EXPECT_EQ(errs.back()["path"], "cmd");
  EXPECT_EQ(errs.back()["errno"], "EINVAL");

  // mv reports it, the same way.
  r = run("printf '%s' '{\"cmd\": \"true\", \"cwd\": \"/nonexistent-dir\"}' > \"$MNT/.cmd.tmp\" && "
          "mv \"$MNT/.cmd.tmp\" \"$MNT/cmd\"");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("No such file or directory"), std::string::npos) << r.err;
  EXPECT_EQ(procs(), before);
  expect_no_scratch("");
  EXPECT_EQ(errors().size(), errors_before + 2);
}

TEST_F(WritersTest, SignalRefusalThroughRenameIsEinval) {
  const std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  RunResult r = run_argv({python_path(), "-c",
                          "import errno, os, sys\n"
                          "d = sys.argv[1]\n"
                          "open(d + '/.s.tmp', 'w').write('NOSUCHSIG\\n')\n"
                          "try:\n"
                          "    os.replace(d + '/.s.tmp', d + '/signal')\n"
                          "except OSError as e:\n"
                          "    print(errno.errorcode[e.errno])\n",
                          p("procs/" + id)});
  EXPECT_EQ(r.out, "EINVAL\n") << said(r);
  EXPECT_EQ(errors().back()["path"], "procs/" + id + "/signal");
  // mv fails too (it words rename's EINVAL as "a subdirectory of itself").
  r = run("echo NOSUCHSIG > \"$MNT/procs/$ID/.s.tmp\" && mv \"$MNT/procs/$ID/.s.tmp\" \"$MNT/procs/$ID/signal\"",
          20, {{"ID", id}});
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(status_json(id)["running"], true);
  expect_no_scratch("procs/" + id);
}

TEST_F(WritersTest, InterruptedRenameOntoStopIsReleased) {
  // TERM is ignored: the stop waits for the grace, the rename with it.
  const std::string id = start(R"({"cmd": "trap '' TERM; echo armed; sleep 30", "stopGraceSec": 8})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id) == "armed\n"; }, 5s)) << log(id);
  const pid_t mover = spawn_bg("echo > \"$MNT/procs/" + id + "/.stop.tmp\" && exec mv \"$MNT/procs/" + id +
                               "/.stop.tmp\" \"$MNT/procs/" + id + "/stop\"");
  // The rename reached the daemon once the stop is noted in the box's steps.
  ASSERT_TRUE(wait_until([&] { return has_step("stop", id); }, 10s)) << file("steps.json");
  ASSERT_EQ(::kill(-mover, SIGTERM), 0);
  EXPECT_EQ(wait_bg(mover, 5s), std::optional<int>(128 + SIGTERM)) << "the rename was not interrupted";
  // Released by its signal, not by the end (the command lasts the grace).
  EXPECT_TRUE(status_json(id)["running"].get<bool>());
  // The daemon answered it and goes on; the stop goes on too.
  EXPECT_EQ(stat_errno(p("status.json")), 0);
  json st = wait_ended(id, 20s);
  EXPECT_EQ(st["endReason"], "stopped");
  expect_no_scratch("procs/" + id);
}

// ---- scratch files as files -------------------------------------------------

TEST_F(WritersTest, ScratchFilesGoWithTheirFolder) {
  ASSERT_EQ(mkdir_errno(p("procs/sc1")), 0);
  ASSERT_EQ(write_file(p("procs/sc1/keep.txt"), "data\n", O_WRONLY | O_CREAT | O_EXCL), 0);
  ASSERT_EQ(::rmdir(p("procs/sc1").c_str()), 0);
  ASSERT_EQ(mkdir_errno(p("procs/sc1")), 0);
  EXPECT_EQ(stat_errno(p("procs/sc1/keep.txt")), ENOENT) << "a folder made again is empty";
  EXPECT_EQ(write_file(p("procs/sc1/keep.txt"), "new\n", O_WRONLY | O_CREAT | O_EXCL), 0) << "and its name is free";
}

TEST_F(WritersTest, ScratchFilesAreOrdinaryFiles) {
  const std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const std::string d = "procs/" + id;
  ASSERT_EQ(write_file(p(d + "/notes.txt"), "hello\n", O_WRONLY | O_CREAT | O_EXCL), 0);
  EXPECT_EQ(file(d + "/notes.txt"), "hello\n");
  struct stat sb {};
  ASSERT_EQ(::stat(p(d + "/notes.txt").c_str(), &sb), 0);
  EXPECT_TRUE(S_ISREG(sb.st_mode));
  EXPECT_EQ(sb.st_size, 6);
  std::vector<std::string> names = list_dir(p(d));
  EXPECT_NE(std::find(names.begin(), names.end(), "notes.txt"), names.end());
  // O_EXCL on an existing name; truncate; rename between scratch names.
  EXPECT_EQ(write_file(p(d + "/notes.txt"), "x", O_WRONLY | O_CREAT | O_EXCL), EEXIST);
  ASSERT_EQ(::truncate(p(d + "/notes.txt").c_str(), 2), 0);
  EXPECT_EQ(file(d + "/notes.txt"), "he");
  ASSERT_EQ(::rename(p(d + "/notes.txt").c_str(), p("moved.txt").c_str()), 0);
  EXPECT_EQ(file("moved.txt"), "he");
  EXPECT_EQ(stat_errno(p(d + "/notes.txt")), ENOENT);
  ASSERT_EQ(::unlink(p("moved.txt").c_str()), 0);
  EXPECT_EQ(stat_errno(p("moved.txt")), ENOENT);
  // Unlinked while open (an editor's swap file): the open file still works.
  RunResult r = python("import os\n"
                       "p = os.environ['MNT'] + '/.swap'\n"
                       "fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)\n"
                       "os.unlink(p)\n"
                       "os.write(fd, b'still here')\n"
                       "print(os.pread(fd, 100, 0).decode(), os.path.exists(p))\n"
                       "os.close(fd)\n");
  EXPECT_EQ(r.out, "still here False\n") << r.err;
  expect_no_scratch("");
  expect_no_scratch(d);
}

TEST_F(WritersTest, TreeNamesKeepTheirPlaceAndErrnos) {
  ASSERT_EQ(write_file(p(".x.tmp"), "data", O_WRONLY | O_CREAT | O_EXCL), 0);
  errno = 0;
  EXPECT_NE(::rename(p("cmd").c_str(), p("cmd2").c_str()), 0);
  EXPECT_EQ(errno, EPERM) << "a file of the tree cannot be renamed";
  EXPECT_NE(::rename(p(".x.tmp").c_str(), p("status.json").c_str()), 0);
  EXPECT_EQ(errno, EACCES) << "read-only target";
  EXPECT_NE(::rename(p(".x.tmp").c_str(), p("procs").c_str()), 0);
  EXPECT_EQ(errno, EISDIR);
  EXPECT_NE(::rename(p(".x.tmp").c_str(), p("procs/x").c_str()), 0);
  EXPECT_EQ(errno, EACCES) << "procs/ holds records only";
  EXPECT_EQ(file(".x.tmp"), "data") << "a refused rename leaves the scratch";
  EXPECT_NE(::unlink(p("status.json").c_str()), 0);
  EXPECT_EQ(errno, EPERM);
  // A read-only file cannot be truncated, by truncate(2) or by an open.
  EXPECT_NE(::truncate(p("status.json").c_str(), 0), 0);
  EXPECT_EQ(errno, EACCES);
  RunResult trunc = python("import os; os.open(os.environ['MNT'] + '/status.json', os.O_RDONLY | os.O_TRUNC)");
  EXPECT_NE(trunc.err.find("PermissionError"), std::string::npos) << said(trunc);
  EXPECT_NE(::symlink("/etc/passwd", p("link").c_str()), 0);
  EXPECT_EQ(errno, EACCES);
  EXPECT_NE(::mkfifo(p("fifo").c_str(), 0600), 0);
  EXPECT_EQ(errno, EACCES);
  EXPECT_NE(::mknod(p("node").c_str(), S_IFREG | 0600, 0), 0);
  EXPECT_EQ(errno, EACCES);
  EXPECT_NE(::link(p(".x.tmp").c_str(), p("hard").c_str()), 0);
  EXPECT_EQ(errno, EACCES);
  EXPECT_NE(::link(p("cmd").c_str(), p("hard").c_str()), 0);
  EXPECT_EQ(errno, EACCES);
  ASSERT_EQ(::unlink(p(".x.tmp").c_str()), 0);
  expect_no_scratch("");
}

TEST_F(WritersTest, CopyingToolsThatSetModeAndTimesOntoCmdSucceed) {
  // They write, then set the source's mode and times: accepted, the tree's stay.
  const std::string src = dir_ + "/req.sh";
  const std::vector<std::pair<std::string, std::vector<std::string>>> tools = {
      {"shutil.copy", {python_path(), "-c", "import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2])"}},
      {"shutil.copy2", {python_path(), "-c", "import shutil, sys; shutil.copy2(sys.argv[1], sys.argv[2])"}},
      {"cp -p", {"cp", "-p"}},
  };
  for (const auto& [tool, argv] : tools) {
    SCOPED_TRACE(tool);
    ASSERT_EQ(write_file(src, "echo " + tool + "\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
    ASSERT_EQ(::chmod(src.c_str(), 0640), 0);
    const std::vector<std::string> before = procs();
    std::vector<std::string> args = argv;
    args.push_back(src);
    args.push_back(p("cmd"));
    RunResult r = run_argv(args);
    EXPECT_EQ(r.code, 0) << said(r);
    const std::string id = new_record(before);
    ASSERT_FALSE(id.empty());
    wait_ended(id);
    EXPECT_EQ(log(id), tool + "\n");
  }
  struct stat sb {};
  ASSERT_EQ(::stat(p("cmd").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0666u);
  EXPECT_EQ(sb.st_uid, ::getuid());
  EXPECT_TRUE(errors().empty()) << errors().front().dump();
  // chmod and chown of a writable file change nothing, and succeed.
  const std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(::chmod(p("procs/" + id + "/signal").c_str(), 0600), 0);
  EXPECT_EQ(::chown(p("procs/" + id + "/stop").c_str(), ::getuid(), ::getgid() + 1), 0);
  ASSERT_EQ(::stat(p("procs/" + id + "/signal").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0222u);
  EXPECT_EQ(status_json(id)["running"], true);
  // Read-only files and folders keep theirs, and say so.
  errno = 0;
  EXPECT_NE(::chmod(p("status.json").c_str(), 0600), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::chmod(p("procs").c_str(), 0700), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::chmod(p("status.json").c_str(), 0444), 0) << "set to what it is";
}

// ---- empty writes -----------------------------------------------------------

TEST_F(WritersTest, EmptyWritesStop) {
  const std::vector<std::pair<std::string, std::string>> writers = {
      {"touch", "touch \"$F\""},
      {": >", ": > \"$F\""},
      {"truncate", "truncate -s 0 \"$F\""},
      {"python", "\"$PY\" -c 'import os; open(os.environ[\"F\"], \"w\").close()'"},
      {"mv of an empty file", ": > \"$F.tmp\" && mv \"$F.tmp\" \"$F\""},
  };
  for (const auto& [what, sh] : writers) {
    SCOPED_TRACE(what);
    const std::string id = start("sleep 30");
    ASSERT_FALSE(id.empty());
    RunResult r = run(sh, 20, {{"F", p("procs/" + id + "/stop")}});
    ASSERT_EQ(r.code, 0) << said(r);
    // The close returned once the command was over.
    json st = status_json(id);
    EXPECT_EQ(st["running"], false);
    EXPECT_EQ(st["endReason"], "stopped");
  }
}

TEST_F(WritersTest, EmptyWritesElsewhere) {
  // signal, ready, steps: an empty write does nothing, and is no error.
  const std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const std::size_t errors_before = error_count();
  for (const std::string f : {"signal", "ready", "steps"}) {
    RunResult r = run("touch \"$MNT/procs/$ID/" + f + "\" && : > \"$MNT/procs/$ID/" + f + "\"", 20, {{"ID", id}});
    EXPECT_EQ(r.code, 0) << f << ": " << said(r);
  }
  EXPECT_EQ(status_json(id)["running"], true);
  EXPECT_EQ(error_count(), errors_before);

  // cmd: an empty request, refused at close; nothing starts.
  const std::vector<std::string> before = procs();
  RunResult r = run(": > \"$MNT/cmd\"");
  EXPECT_EQ(r.code, 0) << "the shell ignores the close's error";
  ASSERT_EQ(error_count(), errors_before + 1);
  EXPECT_EQ(errors().back()["path"], "cmd");
  EXPECT_EQ(errors().back()["errno"], "EINVAL");
  r = python("import errno, os\n"
             "try:\n"
             "    open(os.environ['MNT'] + '/cmd', 'w').close()\n"
             "except OSError as e:\n"
             "    print(errno.errorcode[e.errno])\n"
             "fd = os.open(os.environ['MNT'] + '/cmd', os.O_RDWR)\n"
             "os.read(fd, 4096)\n"
             "os.close(fd)\n"
             "print('rdwr ok')\n");
  EXPECT_EQ(r.out, "EINVAL\nrdwr ok\n") << said(r);
  EXPECT_EQ(error_count(), errors_before + 2);
  EXPECT_EQ(procs(), before);
  // A real request through the shell's dup2-then-close is no empty one.
  ASSERT_EQ(run("echo true > \"$MNT/cmd\"").code, 0);
  EXPECT_EQ(procs().size(), before.size() + 1);
  EXPECT_EQ(error_count(), errors_before + 2);
  // Nor is a child's close of the copy it inherited (at its exit): the
  // request is the opener's, whole at its own close.
  r = bash("exec 6>\"$MNT/cmd\"; /bin/true; echo 'echo fine' >&6; exec 6>&-");
  ASSERT_EQ(r.code, 0) << said(r);
  EXPECT_EQ(error_count(), errors_before + 2) << errors().back().dump();
  ASSERT_EQ(procs().size(), before.size() + 2);
  EXPECT_EQ(wait_json(procs().back())["proc"]["cmd"], "echo fine");
  r = python("import os, subprocess\n"
             "fd = os.open(os.environ['MNT'] + '/cmd', os.O_WRONLY)\n"
             "os.write(fd, b'echo part')\n"
             "subprocess.run(['/bin/true'], check=True, pass_fds=[fd])\n"
             "os.write(fd, b'ial')\n"
             "os.close(fd)\n");
  ASSERT_EQ(r.code, 0) << said(r);
  ASSERT_EQ(procs().size(), before.size() + 3);
  EXPECT_EQ(wait_json(procs().back())["proc"]["cmd"], "echo partial");
  EXPECT_EQ(log(procs().back()), "partial\n");
  EXPECT_EQ(error_count(), errors_before + 2);
}

// A rename is one whole write and close, whatever else the renamer holds
// open: an empty scratch renamed onto cmd is an empty request (EINVAL and
// a line) also while the renaming process has cmd open on another
// descriptor (`perl -pi` of an empty slot's cmd did nothing, with exit 0;
// audit).
TEST_F(WritersTest, AnEmptyRenameIsAnEmptyRequestWhateverTheRenamerHoldsOpen) {
  const std::size_t errors_before = error_count();
  const std::vector<std::string> before = procs();
  RunResult r = bash("cd \"$MNT\" && exec 3<cmd && : > .e && mv .e cmd; echo \"rc=$?\"");
  EXPECT_NE(r.out.find("rc=1"), std::string::npos) << said(r);
  ASSERT_EQ(error_count(), errors_before + 1);
  EXPECT_EQ(errors().back()["path"], "cmd");
  EXPECT_EQ(errors().back()["errno"], "EINVAL");
  EXPECT_EQ(procs(), before);
}

// A scratch renamed while open is delivered at its writer's close, which
// may be that of a child that wrote through an inherited descriptor: a
// later write of the parent's can go nowhere, and says so (it returned
// success and the bytes were lost; audit).
TEST_F(WritersTest, AWriteAfterADeliveryIsEioWithALine) {
  const std::size_t errors_before = error_count();
  const std::vector<std::string> before = procs();
  RunResult r = bash("cd \"$MNT\" && exec 5>.x && mv .x cmd && /bin/echo 'echo req' >&5 && "
                     "{ echo 'echo more' >&5; echo \"rc=$?\"; }");
  EXPECT_NE(r.out.find("rc=1"), std::string::npos) << said(r);
  ASSERT_EQ(procs().size(), before.size() + 1) << said(r);
  EXPECT_EQ(wait_json(procs().back())["proc"]["cmd"], "echo req");
  ASSERT_EQ(error_count(), errors_before + 1);
  EXPECT_EQ(errors().back()["path"], "cmd");
  EXPECT_EQ(errors().back()["errno"], "EIO");
}

// ---- record names and the state directory ----------------------------------

TEST_F(WritersTest, DotNamesAreRefusedAndStagingNamesMeanNothingAcrossKill9) {
  EXPECT_EQ(mkdir_errno(p("procs/.new-x")), EINVAL);
  EXPECT_EQ(mkdir_errno(p("procs/.del-x.1")), EINVAL);
  RunResult r = python("import errno, os\n"
                       "fd = os.open(os.environ['MNT'] + '/cmd', os.O_WRONLY)\n"
                       "try:\n"
                       "    os.write(fd, b'{\"cmd\": \"true\", \"name\": \".new-y\"}')\n"
                       "except OSError as e:\n"
                       "    print(errno.errorcode[e.errno])\n");
  EXPECT_EQ(r.out, "EINVAL\n") << said(r);

  // The names the staging folders were given once are ordinary names now.
  ASSERT_EQ(start(R"({"cmd": "echo kept-a", "name": "new-x"})"), "new-x");
  ASSERT_EQ(start(R"({"cmd": "echo kept-b", "name": "del-x.1"})"), "del-x.1");
  ASSERT_EQ(start(R"({"cmd": "sleep 30", "name": "x"})"), "x");
  wait_ended("new-x");
  wait_ended("del-x.1");

  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  // What an older build left: a record the user named `.new-old`.
  const std::string old = state_ + "/procs/.new-old";
  ASSERT_EQ(::mkdir(old.c_str(), 0700), 0);
  ASSERT_EQ(write_file(old + "/spec.json", R"({"bgId": ".new-old", "argv": ["/bin/true"], "cwd": "/"})",
                       O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(write_file(old + "/exit.json",
                       R"({"exitCode": 0, "signal": null, "endReason": "exited", "timedOut": false, "finishedAt": ")" +
                           iso_time_ago(60) + R"("})",
                       O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(write_file(old + "/log", "old-log\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_TRUE(start_daemon());

  const std::vector<std::string> ids = procs();
  for (const std::string id : {"new-x", "del-x.1", "x", ".new-old"})
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
  EXPECT_EQ(log("new-x"), "kept-a\n");
  EXPECT_EQ(log("del-x.1"), "kept-b\n");
  EXPECT_EQ(log(".new-old"), "old-log\n");
  EXPECT_EQ(status_json("x")["running"], true);
  // Nothing of the daemon's own sits among the records.
  for (const std::string& name : list_dir(state_ + "/procs"))
    if (name[0] == '.') {
      EXPECT_EQ(name, ".new-old");
    }
  ASSERT_EQ(write_file(p("procs/x/stop"), "\n"), 0);
  EXPECT_EQ(status_json("x")["running"], false);
  EXPECT_EQ(rmdir_errno(p("procs/.new-old")), 0);
  EXPECT_EQ(rmdir_errno(p("procs/new-x")), 0);
  EXPECT_EQ(log("del-x.1"), "kept-b\n");
}

// ---- folders and PATH -------------------------------------------------------

TEST_F(WritersTest, RecordFoldersDateFromTheirStart) {
  const std::string a = start("true");
  ASSERT_FALSE(a.empty());
  wait_ended(a);
  const std::string b = start("true");
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(mkdir_errno(p("procs/empty-slot")), 0);
  RunResult r = run("ls -t \"$MNT/procs\"");
  ASSERT_EQ(r.code, 0) << said(r);
  EXPECT_EQ(r.out, b + "\n" + a + "\nempty-slot\n") << "newest first; an empty slot dates from the mount";
  // The mtime is the record's startedAt, to the millisecond.
  RunResult check = run_argv({python_path(), "-c",
                              "import datetime, json, os, sys\n"
                              "d = sys.argv[1]\n"
                              "s = json.load(open(d + '/status.json'))['startedAt']\n"
                              "t = datetime.datetime.strptime(s, '%Y-%m-%dT%H:%M:%S.%fZ')"
                              ".replace(tzinfo=datetime.timezone.utc)\n"
                              "print(abs(os.stat(d).st_mtime - t.timestamp()) < 0.002)\n",
                              p("procs/" + b)});
  EXPECT_EQ(check.out, "True\n") << said(check);
}

TEST_F(WritersTest, SbxStepIsOnThePathOfEveryCommand) {
  const std::string id = start("command -v sbx-step && sbx-step build -- true");
  ASSERT_FALSE(id.empty());
  json st = wait_ended(id);
  EXPECT_EQ(st["exitCode"], 0) << log(id);
  const std::string out = log(id);
  EXPECT_EQ(out.substr(0, 1), "/") << out;
  EXPECT_NE(out.find("/sbx-step\n"), std::string::npos) << out;
  json steps = parse_json(file("procs/" + id + "/steps.json"));
  ASSERT_TRUE(steps.is_array() && steps.size() == 1) << steps.dump();
  EXPECT_EQ(steps[0]["name"], "build");
}

// ---- the time to live and the limits ---------------------------------------

class ScratchTtlTest : public SbxfsTest {
 protected:
  ScratchTtlTest() { daemon_options_ = {"-o", "scratch_ttl_ms=300"}; }
};

TEST_F(ScratchTtlTest, UnrenamedScratchIsRemovedWithAnErrorsLine) {
  const std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  // The typo the clean-up is for.
  ASSERT_EQ(run("echo TERM > \"$MNT/procs/$ID/sginal\"", 20, {{"ID", id}}).code, 0);
  const std::string path = "procs/" + id + "/sginal";
  auto logged = [&] {
    for (const json& e : errors())
      if (e["path"] == path) return true;
    return false;
  };
  ASSERT_TRUE(wait_until(logged, 10s)) << "no errors line for " << path;
  EXPECT_EQ(stat_errno(p(path)), ENOENT);
  for (const json& e : errors())
    if (e["path"] == path) {
      EXPECT_EQ(e["errno"], "ETIMEDOUT");
      EXPECT_EQ(e["request"], "TERM\n");
    }
  EXPECT_EQ(status_json(id)["running"], true);

  // One held open outlives its time; it goes once closed.
  RunResult r = python("import os, time\n"
                       "p = os.environ['MNT'] + '/held'\n"
                       "fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)\n"
                       "time.sleep(0.9)\n"
                       "os.stat(p)\n"
                       "os.close(fd)\n"
                       "print('held')\n");
  EXPECT_EQ(r.out, "held\n") << r.err;
  EXPECT_TRUE(wait_until([&] { return stat_errno(p("held")) == ENOENT; }, 10s));
}

TEST_F(ScratchTtlTest, TheErrorsLineOfAnUnrenamedScratchMasksSecrets) {
  // The record's secretEnv in a scratch of its folder; a request's own
  // secretEnv in one of the root, the request longer than the 200
  // characters shown (it is parsed whole).
  const std::string id = start(R"({"cmd": "sleep 30", "secretEnv": {"TOK": "recsecret77"}})");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(run("echo 'echo recsecret77' > \"$MNT/procs/$ID/sginal\"", 20, {{"ID", id}}).code, 0);
  const std::string request = R"({"note": ")" + std::string(100, 'n') +
                              R"(", "cmd": "deploy", "secretEnv": {"API_KEY": "u1-private-key-123"}, "more": ")" +
                              std::string(100, 'm') + "\"}";
  ASSERT_EQ(write_file(p(".cmd.1f2e.tmp"), request, O_WRONLY | O_CREAT | O_EXCL), 0);
  auto line = [&](const std::string& path) -> std::optional<json> {
    for (const json& e : errors())
      if (e["path"] == path) return e;
    return std::nullopt;
  };
  ASSERT_TRUE(wait_until([&] { return line(".cmd.1f2e.tmp") && line("procs/" + id + "/sginal"); }, 10s))
      << file("errors");
  EXPECT_EQ((*line("procs/" + id + "/sginal"))["request"], "echo ****\n");
  const std::string shown = (*line(".cmd.1f2e.tmp"))["request"];
  EXPECT_EQ(shown.size(), 200u) << shown;
  const std::string errors_text = file("errors");
  EXPECT_EQ(errors_text.find("recsecret77"), std::string::npos) << errors_text;
  EXPECT_EQ(errors_text.find("u1-private"), std::string::npos) << errors_text;
}

class ScratchLimitsTest : public SbxfsTest {
 protected:
  ScratchLimitsTest() { daemon_options_ = {"-o", "max_request=4096"}; }
};

TEST_F(ScratchLimitsTest, SixtyFifthIsEdquotAndOversizeIsEfbig) {
  RunResult r = python("import errno, os\n"
                       "m = os.environ['MNT']\n"
                       "for i in range(64):\n"
                       "    os.close(os.open('%s/s%02d' % (m, i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))\n"
                       "try:\n"
                       "    os.open(m + '/s64', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)\n"
                       "except OSError as e:\n"
                       "    print(errno.errorcode[e.errno])\n"
                       "os.unlink(m + '/s00')\n"
                       "fd = os.open(m + '/s64', os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)\n"
                       "os.write(fd, b'x' * 4096)\n"
                       "try:\n"
                       "    os.write(fd, b'y')\n"
                       "except OSError as e:\n"
                       "    print(errno.errorcode[e.errno])\n"
                       "try:\n"
                       "    os.ftruncate(fd, 5000)\n"
                       "except OSError as e:\n"
                       "    print(errno.errorcode[e.errno])\n"
                       "os.close(fd)\n"
                       "print(os.stat(m + '/s64').st_size)\n");
  EXPECT_EQ(r.out, "EDQUOT\nEFBIG\nEFBIG\n4096\n") << r.err;
  EXPECT_EQ(list_dir(mnt_).size(), kRootNames.size() + 64);
  bool logged = false;
  for (const json& e : errors()) logged = logged || (e["path"] == "s64 (create)" && e["errno"] == "EDQUOT");
  EXPECT_TRUE(logged);
}

// install(1) removes its target before it copies: a file of the tree cannot
// be removed, so it fails at once and starts nothing.
TEST_F(WritersTest, InstallCannotReplaceAFileOfTheTree) {
  ASSERT_EQ(write_file(dir_ + "/req", "echo via-install\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  const RunResult r = run("install -m 600 \"$T/req\" \"$MNT/cmd\"");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("Operation not permitted"), std::string::npos) << r.err;
  EXPECT_EQ(procs(), std::vector<std::string>{});
}

}  // namespace
}  // namespace sbxit
