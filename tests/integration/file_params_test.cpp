// Parameters in file names: `procs/ID/wait,timeoutSec=1`, `tail,tailBytes=N`,
// `status.json,all`... read with cat and Python's plain file I/O; the
// errors; names not listed; the inodes of 10 000 distinct names forgotten.
#include <string>

#include "../common/free_port.hpp"
#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using sbxtest_common::free_port;

class FileParamsTest : public SbxfsTest {
 protected:
  FileParamsTest() { daemon_options_ = {"-o", "wait_timeout=30"}; }

  /// `cat MNT/REL`: its output parsed (a failure when cat fails).
  json cat_json(const std::string& rel, int timeout_sec = 10) {
    RunResult r = run("cat \"$MNT/$REL\"", timeout_sec, {{"REL", rel}});
    EXPECT_EQ(r.code, 0) << rel << ": " << r.err;
    json j = parse_json(r.out);
    EXPECT_FALSE(j.is_discarded()) << rel << ": " << r.out;
    return j;
  }

  /// The errno of open(MNT/REL, O_RDONLY) from Python, as a name ("EINVAL"), "0" when it opened.
  std::string python_open_errno(const std::string& rel) {
    RunResult r = python(
        "import os, errno\n"
        "try:\n"
        "    open(os.environ['MNT'] + '/' + os.environ['REL']).close()\n"
        "    print('0')\n"
        "except OSError as e:\n"
        "    print(errno.errorcode[e.errno])\n",
        10, {{"REL", rel}});
    while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
    return r.out;
  }

  /// The last line of `errors` about `path`.
  json error_about(const std::string& path) {
    json found;
    for (const json& e : errors())
      if (e.value("path", "") == path) found = e;
    return found;
  }

  std::size_t param_nodes() { return root_status()["supervisor"].value("paramNodes", std::size_t{0}); }
};

TEST_F(FileParamsTest, WaitWithItsOwnCapAnswersStillRunning) {
  std::string id = start("echo started; sleep 30");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id) == "started\n"; }, 5s));
  RunResult r = run("cat \"$MNT/procs/$ID/wait,timeoutSec=1\"", 10, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GE(r.seconds, 0.9);
  EXPECT_LT(r.seconds, 3.0);
  json w = parse_json(r.out);
  ASSERT_TRUE(w.is_object()) << r.out;
  EXPECT_EQ(w["stillRunning"], true);
  EXPECT_EQ(w["proc"]["bgId"], id);
  EXPECT_EQ(w["proc"]["running"], true);
  EXPECT_EQ(w["proc"]["logTail"], "started\n");
  // The command goes on, and the plain wait is unchanged.
  EXPECT_EQ(status_json(id)["running"], true);
}

TEST_F(FileParamsTest, WaitFromPythonPlainFileIo) {
  std::string id = start("printf 'abcdefghij'; sleep 30");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id) == "abcdefghij"; }, 5s));
  RunResult r = python(
      "import os, json, time\n"
      "t = time.monotonic()\n"
      "with open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/wait,timeoutSec=1,tailBytes=3') as f:\n"
      "    w = json.load(f)\n"
      "print(json.dumps({'took': time.monotonic() - t, 'w': w}))\n",
      10, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = parse_json(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_GE(j["took"].get<double>(), 0.9);
  EXPECT_EQ(j["w"]["stillRunning"], true);
  EXPECT_EQ(j["w"]["proc"]["logTail"], "hij");
}

TEST_F(FileParamsTest, WaitTailBytesOnAnEndedCommand) {
  std::string id = start("seq 1 1000");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  json w = cat_json("procs/" + id + "/wait,tailBytes=4");
  EXPECT_EQ(w["stillRunning"], false);
  EXPECT_EQ(w["proc"]["exitCode"], 0);
  EXPECT_EQ(w["proc"]["logTail"], "000\n");
  EXPECT_EQ(w["proc"]["logTail"], cat_json("procs/" + id + "/wait,tailBytes=4,timeoutSec=5")["proc"]["logTail"]);
}

TEST_F(FileParamsTest, TailAndStatusJsonTailBytes) {
  std::string id = start("seq 1 5000");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  EXPECT_EQ(file("procs/" + id + "/tail,tailBytes=11"), "\n4999\n5000\n");
  EXPECT_EQ(file("procs/" + id + "/tail,tailBytes=16384").size(), 16384u);
  EXPECT_EQ(file("procs/" + id + "/tail").size(), 4096u);  // the plain name is unchanged
  json st = cat_json("procs/" + id + "/status.json,tailBytes=5");
  EXPECT_EQ(st["bgId"], id);
  EXPECT_EQ(st["exitCode"], 0);
  EXPECT_EQ(st["logTail"], "5000\n");
  EXPECT_FALSE(status_json(id).contains("logTail"));
}

TEST_F(FileParamsTest, OutputWithItsOwnCapAndMaxBytes) {
  std::string id = start("printf 0123456789; printf err >&2; sleep 30");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id).size() == 13; }, 5s));
  RunResult r = run("cat \"$MNT/procs/$ID/output,timeoutSec=1,maxBytes=4\"", 10, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_GE(r.seconds, 0.9);
  json o = parse_json(r.out);
  ASSERT_TRUE(o.is_object()) << r.out;
  EXPECT_EQ(o["stillRunning"], true);
  EXPECT_EQ(o["stdout"], "6789");
  EXPECT_EQ(o["stdoutTruncated"], true);
  EXPECT_EQ(o["stderr"], "err");
  // 0: no cap (up to log_max).
  json all = cat_json("procs/" + id + "/output,timeoutSec=1,maxBytes=0");
  EXPECT_EQ(all["stdout"], "0123456789");
  EXPECT_EQ(all["truncated"], false);
}

TEST_F(FileParamsTest, RootStatusAllListsEndedCommandsOldestFirst) {
  std::string a = start("exit 3");
  ASSERT_FALSE(a.empty());
  wait_ended(a);
  std::string b = start("kill -KILL $$");
  ASSERT_FALSE(b.empty());
  wait_ended(b);
  std::string c = start("echo hi; sleep 30");
  ASSERT_FALSE(c.empty());
  ASSERT_EQ(mkdir_errno(p("procs/slot1")), 0);  // an empty slot is no command

  json plain = root_status();
  ASSERT_EQ(plain["procs"].size(), 1u);
  EXPECT_EQ(plain["finished"], 2);
  const json& running = plain["procs"][0];
  EXPECT_EQ(running["bgId"], c);
  EXPECT_EQ(running["state"], "running");
  EXPECT_TRUE(running["pid"].is_number());
  EXPECT_FALSE(running["cwd"].get<std::string>().empty());
  EXPECT_FALSE(running.contains("exitCode"));

  json all = cat_json("status.json,all");
  ASSERT_EQ(all["procs"].size(), 3u) << all.dump(1);
  EXPECT_EQ(all["finished"], 2);
  EXPECT_EQ(all["procs"][0]["bgId"], a);
  EXPECT_EQ(all["procs"][1]["bgId"], b);
  EXPECT_EQ(all["procs"][2]["bgId"], c);
  const json& ea = all["procs"][0];
  EXPECT_EQ(ea["running"], false);
  EXPECT_EQ(ea["state"], "exited");
  EXPECT_EQ(ea["exitCode"], 3);
  EXPECT_TRUE(ea["signal"].is_null());
  EXPECT_EQ(ea["endReason"], "exited");
  EXPECT_TRUE(is_iso_time(ea["finishedAt"]));
  const json& eb = all["procs"][1];
  EXPECT_EQ(eb["exitCode"], -1);
  EXPECT_EQ(eb["signal"], "SIGKILL");
  EXPECT_EQ(eb["endReason"], "killed");
  for (const char* k : {"bgId", "running", "state", "note", "cmd", "cwd", "pid", "startedAt", "logPath", "mine", "cpu"})
    EXPECT_TRUE(ea.contains(k)) << k;
  EXPECT_FALSE(ea.contains("logTail"));

  json tails = cat_json("status.json,all,tailBytes=3");
  ASSERT_EQ(tails["procs"].size(), 3u);
  EXPECT_EQ(tails["procs"][0]["logTail"], "");
  EXPECT_EQ(tails["procs"][2]["logTail"], "hi\n");
  json running_tails = cat_json("status.json,tailBytes=3");
  ASSERT_EQ(running_tails["procs"].size(), 1u);
  EXPECT_EQ(running_tails["procs"][0]["logTail"], "hi\n");
}

// Ended entries are rendered once and kept: a new run of a named slot and a
// removed record show as they are now.
TEST_F(FileParamsTest, RootStatusAllFollowsNewRunsAndRemovals) {
  ASSERT_EQ(mkdir_errno(p("procs/job")), 0);
  ASSERT_EQ(write_file(p("procs/job/cmd"), "exit 1\n"), 0);
  wait_ended("job");
  std::string gone = start("exit 5");
  ASSERT_FALSE(gone.empty());
  wait_ended(gone);
  auto entry = [&](const std::string& id) {
    const json listing = cat_json("status.json,all");
    json found;
    for (const json& e : listing["procs"])
      if (e["bgId"] == id) found = e;
    return found;
  };
  EXPECT_EQ(entry("job")["exitCode"], 1);
  EXPECT_EQ(entry(gone)["exitCode"], 5);
  ASSERT_EQ(write_file(p("procs/job/cmd"), "exit 2\n"), 0);
  wait_ended("job");
  EXPECT_EQ(entry("job")["exitCode"], 2);
  ASSERT_EQ(rmdir_errno(p("procs/" + gone)), 0);
  EXPECT_TRUE(entry(gone).is_null());
  EXPECT_EQ(cat_json("status.json,all")["finished"], 1);
}

TEST_F(FileParamsTest, ReadyWhenNamesTheRecordsCondition) {
  std::string id = start(R"({"cmd": "echo up; sleep 30", "readyLog": "^up$"})");
  ASSERT_FALSE(id.empty());
  json r = cat_json("procs/" + id + "/ready");
  EXPECT_EQ(r["ready"], true);
  EXPECT_EQ(status_json(id)["readyWhen"], "log ^up$");
  EXPECT_FALSE(status_json(id).contains("readyCondition"));
  json listed = root_status()["procs"][0];
  EXPECT_EQ(listed["readyWhen"], "log ^up$");
  EXPECT_EQ(listed["ready"], true);
  EXPECT_TRUE(is_iso_time(listed["readyAt"]));
}

TEST_F(FileParamsTest, ReadyPortIsAConditionOfThisReadAlone) {
  const int port = free_port();
  const std::string go = dir_ + "/go";
  // The record's own condition never holds; the reader's port opens on `go`.
  std::string id = start(R"({"cmd": "while [ ! -e ')" + go +
                         R"(' ]; do sleep 0.05; done; exec python3 -c 'import socket,time\ns=socket.socket()\n)"
                         R"(s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind((\"127.0.0.1\", )" +
                         std::to_string(port) + R"()); s.listen(); time.sleep(30)'", "readyLog": "never-printed"})");
  ASSERT_FALSE(id.empty());
  const std::string out = dir_ + "/ready.out";
  pid_t reader = spawn_bg("exec cat \"$MNT/procs/" + id + "/ready,readyPort=" + std::to_string(port) + "\"", out);
  EXPECT_FALSE(wait_until([&] { return !read_file(out).data.empty(); }, 400ms)) << "answered before the port opened";
  ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT), 0);
  auto rc = wait_bg(reader, 10s);
  ASSERT_TRUE(rc.has_value()) << "the reader's port condition did not answer";
  EXPECT_EQ(*rc, 0);
  json r = parse_json(read_file(out).data);
  ASSERT_TRUE(r.is_object()) << read_file(out).data;
  EXPECT_EQ(r["ready"], true);
  EXPECT_TRUE(is_iso_time(r["readyAt"]));
  EXPECT_EQ(r["readyWhen"], "port " + std::to_string(port));
  EXPECT_EQ(r["stillRunning"], true);
  // The record's condition is untouched, and not ready.
  json st = status_json(id);
  EXPECT_EQ(st["readyWhen"], "log never-printed");
  EXPECT_EQ(st["ready"], false);
  // Its plain ready still blocks (the record's condition): cut by a cap.
  json capped = cat_json("procs/" + id + "/ready,timeoutSec=1,tailBytes=100");
  EXPECT_EQ(capped["ready"], false);
  EXPECT_EQ(capped["stillRunning"], true);
  EXPECT_TRUE(capped["proc"].contains("logTail"));
  // A write through a name that gives a condition is neither's: EINVAL.
  EXPECT_NE(run("echo 'log x' > \"$MNT/procs/$ID/ready,readyPort=22\"", 10, {{"ID", id}}).code, 0);
  EXPECT_NE(errors().back().value("error", "").find("this name gives a condition of its own"), std::string::npos)
      << errors().back().dump();
  EXPECT_EQ(status_json(id)["readyWhen"], "log never-printed");
}

TEST_F(FileParamsTest, ReadyPortWithoutARecordConditionAndOnAnEndedCommand) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  const int port = free_port();  // nobody listens
  RunResult r = run("cat \"$MNT/procs/$ID/ready,readyPort=" + std::to_string(port) + ",timeoutSec=1\"", 10,
                    {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = parse_json(r.out);
  EXPECT_EQ(j["ready"], false) << r.out;
  EXPECT_EQ(j["stillRunning"], true);
  EXPECT_FALSE(status_json(id).contains("readyWhen"));
  ASSERT_EQ(write_file(p("procs/" + id + "/stop"), "1"), 0);
  wait_ended(id);
  json ended = cat_json("procs/" + id + "/ready,readyPort=" + std::to_string(port));
  EXPECT_EQ(ended["ready"], false);
  EXPECT_EQ(ended["stillRunning"], false);
}

TEST_F(FileParamsTest, ErrorsAreEinvalWithALineInErrors) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  struct Case {
    std::string rel, says;
  };
  const std::vector<Case> cases = {
      {"procs/" + id + "/wait,timeout=5", "unknown key 'timeout'"},
      {"procs/" + id + "/wait,timeoutSec=abc", "timeoutSec=abc is not a whole number"},
      {"procs/" + id + "/wait,timeoutSec=31", "out of range: 1..30 (the mount's wait_timeout)"},
      {"procs/" + id + "/wait,timeoutSec=0", "out of range"},
      {"procs/" + id + "/wait,tailBytes=1,tailBytes=2", "tailBytes is given twice"},
      {"procs/" + id + "/tail,tailBytes=16385", "out of range: 1..16384"},
      {"procs/" + id + "/ready,readyPort=70000", "out of range: 1..65535"},
      {"procs/" + id + "/log,follow=1", "follow"},
      {"status.json,all=yes", "all is a flag"},
      {"status.json,ALL", "unknown key 'ALL'"},
  };
  for (const Case& c : cases) {
    RunResult r = run("cat \"$MNT/$REL\"", 10, {{"REL", c.rel}});
    EXPECT_NE(r.code, 0) << c.rel;
    EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << c.rel << ": " << r.err;
    EXPECT_EQ(python_open_errno(c.rel), "EINVAL") << c.rel;
    const json e = error_about(c.rel);
    ASSERT_TRUE(e.is_object()) << "no line in errors for " << c.rel;
    EXPECT_EQ(e["errno"], "EINVAL") << e.dump();
    EXPECT_NE(e.value("error", "").find(c.says), std::string::npos) << e.dump();
  }
  // A comma after a name that is no file of the tree is just no such file.
  EXPECT_EQ(python_open_errno("procs/" + id + "/nosuch,timeoutSec=1"), "ENOENT");
  EXPECT_EQ(python_open_errno("procs/nosuch/wait,timeoutSec=1"), "ENOENT");
}

TEST_F(FileParamsTest, ErrorsOfAReadNameTheFileAsWrittenAndTheKeysANameTakes) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  // No condition anywhere: refused at the read, the name as it was written.
  const std::string unsorted = "procs/" + id + "/ready,timeoutSec=1,tailBytes=7";
  EXPECT_EQ(read_file(p(unsorted)).err, EINVAL);
  json e = error_about(unsorted);
  ASSERT_TRUE(e.is_object()) << "no line for " << unsorted << " in " << file("errors");
  EXPECT_NE(e.value("error", "").find("no ready condition"), std::string::npos) << e.dump();
  // A key that needs a condition: those a name can give.
  const std::string interval = "procs/" + id + "/ready,readyIntervalMs=10";
  EXPECT_EQ(read_file(p(interval)).err, EINVAL);
  e = error_about(interval);
  ASSERT_TRUE(e.is_object()) << file("errors");
  EXPECT_NE(e.value("error", "").find("needs a condition (readyLog or readyPort)"), std::string::npos) << e.dump();
}

TEST_F(FileParamsTest, NamesAreNotListed) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(stat_errno(p("procs/" + id + "/tail,tailBytes=5")), 0);
  ASSERT_EQ(stat_errno(p("status.json,all")), 0);
  RunResult ls = run("ls -a \"$MNT\" \"$MNT/procs/$ID\"", 10, {{"ID", id}});
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_EQ(ls.out.find(','), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("wait"), std::string::npos) << ls.out;
  // The same keys in another order are the same file.
  RunResult st = run("stat -c %i \"$MNT/procs/$ID/wait,timeoutSec=5,tailBytes=9\" "
                     "\"$MNT/procs/$ID/wait,tailBytes=9,timeoutSec=5\" \"$MNT/procs/$ID/wait\"",
                     10, {{"ID", id}});
  ASSERT_EQ(st.code, 0) << st.err;
  const auto nl = st.out.find('\n');
  const std::string first = st.out.substr(0, nl);
  const std::string rest = st.out.substr(nl + 1);
  EXPECT_EQ(rest.substr(0, rest.find('\n')), first);
  EXPECT_NE(rest.substr(rest.find('\n') + 1), first + "\n");
}

TEST_F(FileParamsTest, LogsEntriesTakeTheKeysOfTheLog) {
  std::string id = start("echo a; echo b >&2");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  EXPECT_EQ(file("logs/" + id + ".log,follow"), file("procs/" + id + "/log"));
  EXPECT_EQ(file("logs/" + id + ".log,timestamps"), file("procs/" + id + "/log,timestamps"));
  EXPECT_NE(file("logs/" + id + ".log,timestamps").find("Z b\n"), std::string::npos);
  EXPECT_EQ(read_file(p("logs/" + id + ".log,x")).err, EINVAL);
  ASSERT_FALSE(errors().empty());
  EXPECT_NE(errors().back().value("error", "").find("unknown key 'x'"), std::string::npos) << errors().back().dump();
  EXPECT_EQ(stat_errno(p("logs/nothing.log,follow")), ENOENT);
  EXPECT_EQ(stat_errno(p("logs/" + id + ",follow")), ENOENT);
}

TEST_F(FileParamsTest, TenThousandNamesAreForgotten) {
  std::string id = start("seq 1 20000");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  const std::size_t before = param_nodes();
  // 10 000 distinct names: looked up (stat) and some opened and read; one
  // is kept open throughout, and its entry stays while it is open.
  RunResult r = python(
      "import os, json, time\n"
      "d = os.environ['MNT'] + '/procs/' + os.environ['ID']\n"
      "held = open(d + '/tail,tailBytes=77')\n"
      "for n in range(1, 10001):\n"
      "    if n % 100 == 0:\n"
      "        with open(d + '/tail,tailBytes=%d' % n) as f: assert len(f.read()) == n\n"
      "    else:\n"
      "        os.stat(d + '/wait,tailBytes=%d' % n)\n"
      "def nodes():\n"
      "    with open(os.environ['MNT'] + '/status.json') as f: return json.load(f)['supervisor']['paramNodes']\n"
      "print('after', nodes())\n"
      "t = time.monotonic()\n"
      "while nodes() > 1 and time.monotonic() - t < 20: time.sleep(0.2)\n"
      "print('held', nodes())\n"
      "assert len(held.read()) == 77\n"
      "held.close()\n",
      60, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("held 1\n"), std::string::npos) << "the open file's entry: " << r.out;
  // The kernel is told to drop the names, forgets their inodes, and the
  // daemon's table is back where it was.
  EXPECT_TRUE(wait_until([&] { return param_nodes() <= before + 2; }, 20s, 200ms))
      << "paramNodes stays at " << param_nodes() << " (was " << before << ")";
  // The names still work after that (a fresh lookup).
  EXPECT_EQ(file("procs/" + id + "/tail,tailBytes=6"), "20000\n");
}

TEST_F(FileParamsTest, TheTreesReadmeTeachesTheNames) {
  const std::string readme = file("README");
  for (const char* name : {"procs/ID/wait,timeoutSec=N,tailBytes=N", "readyPort=N", "procs/ID/output,timeoutSec=N,maxBytes=N",
                           "procs/ID/tail,tailBytes=N", "procs/ID/status.json,tailBytes=N", "status.json,all",
                           "status.json,tailBytes=N", "EINVAL", "(1..30)", "logs/ID.log,follow",
                           "procs/ID/log,timestamps", "procs/ID/events,since=CURSOR", "\"name\": \"NAME\"",
                           "write-only", "start NAME", "install(1)", "kept across restarts"})
    EXPECT_NE(readme.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace sbxit
