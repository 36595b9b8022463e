// Readiness per reader, with what matched: conditions written and read back
// on one open `ready` file or given in its name, readers that keep the
// record's condition they started with, the `matched` object of each kind,
// prompts, streams, http status ranges and intervals, readyFd, answers of
// ended commands, readyAt across a daemon restart.
#include <sys/syscall.h>

#include <string>

#include "../common/free_port.hpp"
#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using sbxtest_common::free_port;

class ReadyReadersTest : public SbxfsTest {
 protected:
  /// `pid` sits in a read(2) (of a blocking file of the tree), seen twice in a row.
  static bool blocked_in_read(pid_t pid) {
    auto in_read = [pid] {
      FileResult r = read_file("/proc/" + std::to_string(pid) + "/syscall");
      return r.err == 0 && r.data.rfind(std::to_string(SYS_read) + " ", 0) == 0;
    };
    return wait_until(in_read, 5s) && wait_until([&] { return in_read(); }, 100ms) && in_read();
  }
  /// A reader that writes `cond` on an open `ready` of `id` and reads the answer back on it.
  pid_t own_reader(const std::string& id, const std::string& cond, const std::string& out) {
    return spawn_bg("exec 3<>\"$MNT/procs/" + id + "/ready\"; printf '%s\\n' '" + cond + "' >&3; exec cat <&3", out);
  }
  json answer(const std::string& out) { return parse_json(read_file(out).data); }
  /// A record's ready.json says its end was looked at for the last time.
  static bool settled(const std::string& ready_json) {
    const json j = parse_json(read_file(ready_json).data);
    return j.is_object() && j.value("settled", false);
  }
  /// server.py PORT GATE: answers every GET with 503 until the file GATE
  /// exists, then 200, and prints `probe CODE` for each.
  bool write_http_server() {
    const std::string server =
        "import http.server, os, sys\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        code = 200 if os.path.exists(sys.argv[2]) else 503\n"
        "        print('probe', code, flush=True)\n"
        "        self.send_response(code); self.end_headers()\n"
        "    def log_message(self, *a): pass\n"
        "http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n";
    return write_file(dir_ + "/server.py", server, O_WRONLY | O_CREAT | O_TRUNC) == 0;
  }
  json cat_json(const std::string& rel, int timeout_sec = 15) {
    RunResult r = run("cat \"$MNT/$REL\"", timeout_sec, {{"REL", rel}});
    EXPECT_EQ(r.code, 0) << rel << ": " << r.err;
    return parse_json(r.out);
  }
  json error_about(const std::string& path) {
    json found;
    for (const json& e : errors())
      if (e.value("path", "") == path) found = e;
    return found;
  }
  /// The timestamp of the first event of `id` whose data holds `text`.
  std::string event_time(const std::string& id, const std::string& text) {
    std::string all = file("procs/" + id + "/events");
    std::size_t pos = 0;
    while (pos < all.size()) {
      std::size_t nl = all.find('\n', pos);
      json e = parse_json(all.substr(pos, nl - pos));
      if (e.is_object() && e.value("data", "").find(text) != std::string::npos) return e["timestamp"];
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
    return "";
  }
};

TEST_F(ReadyReadersTest, TwoReadersWithDifferentConditionsAreAnsweredIndependently) {
  const std::string gate = dir_ + "/gate";
  std::string id = start("echo alpha; while [ ! -e '" + gate + "' ]; do sleep 0.05; done; echo beta; sleep 30");
  ASSERT_FALSE(id.empty());
  const std::string a_out = dir_ + "/a.out", b_out = dir_ + "/b.out";
  pid_t b = own_reader(id, "log ^beta$", b_out);
  pid_t a = own_reader(id, "log ^alpha$", a_out);
  ASSERT_EQ(wait_bg(a, 10s), 0);
  json ja = answer(a_out);
  ASSERT_TRUE(ja.is_object()) << read_file(a_out).data;
  EXPECT_EQ(ja["ready"], true);
  EXPECT_EQ(ja["readyWhen"], "log ^alpha$");
  EXPECT_EQ(ja["matched"]["kind"], "log");
  EXPECT_EQ(ja["matched"]["stream"], "stdout");
  EXPECT_EQ(ja["matched"]["text"], "alpha");
  EXPECT_EQ(ja["matched"]["match"], "alpha");
  EXPECT_EQ(ja["readyAt"], event_time(id, "alpha"));
  // The other still waits for its own line; the record has no condition at all.
  EXPECT_TRUE(blocked_in_read(b));
  EXPECT_TRUE(read_file(b_out).data.empty());
  EXPECT_FALSE(status_json(id).contains("readyWhen"));
  // The cursor continues the events after the matched line.
  RunResult after = run("cat \"$MNT/procs/$ID/events,since=$C\"", 10,
                        {{"ID", id}, {"C", ja["matched"]["cursor"].get<std::string>()}});
  EXPECT_EQ(after.code, 0) << after.err;
  EXPECT_EQ(after.out.find("alpha"), std::string::npos) << after.out;
  ASSERT_EQ(write_file(gate, "", O_WRONLY | O_CREAT), 0);
  ASSERT_EQ(wait_bg(b, 10s), 0);
  json jb = answer(b_out);
  EXPECT_EQ(jb["ready"], true);
  EXPECT_EQ(jb["matched"]["text"], "beta");
  EXPECT_EQ(jb["readyAt"], event_time(id, "beta"));
}

TEST_F(ReadyReadersTest, WhoseConditionAWriteIsDependsOnTheOpenFile) {
  std::string id = start("echo up; echo two; sleep 30");
  ASSERT_FALSE(id.empty());
  // Python, read back on one read-write file: this reader's; a write after the read is EBUSY.
  RunResult py = python("import os, json\n"
                        "fd = os.open(os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/ready', os.O_RDWR)\n"
                        "os.write(fd, b'log ^two$')\n"
                        "a = json.loads(os.read(fd, 1 << 20))\n"
                        "try:\n    os.write(fd, b'port 1')\nexcept OSError as e:\n    print(e.errno)\n"
                        "print(a['ready'], a['matched']['text'], a['readyWhen'])\n",
                        10, {{"ID", id}});
  EXPECT_EQ(py.out, std::to_string(EBUSY) + "\nTrue two log ^two$\n") << py.err;
  EXPECT_FALSE(status_json(id).contains("readyWhen"));
  // Written on a read-write file and closed unread: the record's (at the close, which comes after).
  RunResult sh = bash("exec 3<>\"$MNT/procs/$ID/ready\"; echo 'log ^up$' >&3; exec 3>&-", 10, {{"ID", id}});
  ASSERT_EQ(sh.code, 0) << sh.err;
  ASSERT_TRUE(wait_until([&] { return status_json(id).value("readyWhen", "") == "log ^up$"; }, 5s));
  json r = cat_json("procs/" + id + "/ready");
  EXPECT_EQ(r["ready"], true);
  EXPECT_EQ(r["matched"]["text"], "up");
  EXPECT_FALSE(r.contains("readyWhen"));  // the record's: in proc
  EXPECT_EQ(r["proc"]["readyWhen"], "log ^up$");
}

TEST_F(ReadyReadersTest, AReplacedRecordConditionDoesNotReleaseAReaderOfTheOldOne) {
  std::string id = start(R"({"cmd": "echo alpha; sleep 30", "readyLog": "^never$"})");
  ASSERT_FALSE(id.empty());
  const std::string out = dir_ + "/old.out";
  pid_t reader = spawn_bg("exec cat \"$MNT/procs/" + id + "/ready\"", out);
  ASSERT_TRUE(blocked_in_read(reader));
  ASSERT_EQ(write_file(p("procs/" + id + "/ready"), "log ^alpha$\n"), 0);
  json now = cat_json("procs/" + id + "/ready");  // a new reader takes the new condition
  EXPECT_EQ(now["ready"], true);
  EXPECT_EQ(now["matched"]["text"], "alpha");
  json st = status_json(id);
  EXPECT_EQ(st["readyWhen"], "log ^alpha$");
  EXPECT_EQ(st["ready"], true);
  // The reader of ^never$ still waits; the end answers it, not ready.
  EXPECT_TRUE(blocked_in_read(reader));
  ASSERT_EQ(write_file(p("procs/" + id + "/stop"), "1"), 0);
  ASSERT_EQ(wait_bg(reader, 10s), 0);
  json old = answer(out);
  EXPECT_EQ(old["ready"], false) << old.dump();
  EXPECT_EQ(old["proc"]["state"], "exited");
}

TEST_F(ReadyReadersTest, AReaderOfAReplacedPortConditionTriesItItself) {
  // While the record's probe tries port P, its reader tries nothing; once
  // the record's condition is another, the reader tries P itself.
  const int port = free_port();
  const std::string id = start(json({{"cmd", "sleep 30"}, {"readyPort", port}}).dump());
  ASSERT_FALSE(id.empty());
  const std::string out = dir_ + "/old.out";
  const pid_t reader = spawn_bg("exec cat \"$MNT/procs/" + id + "/ready\"", out);
  ASSERT_TRUE(blocked_in_read(reader));
  ASSERT_EQ(write_file(p("procs/" + id + "/ready"), "log ^never$\n"), 0);
  EXPECT_EQ(status_json(id)["readyWhen"], "log ^never$");
  const pid_t listener = spawn_bg(python_path() + " -c 'import socket, time\ns = socket.socket(); "
                                  "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                                  "s.bind((\"127.0.0.1\", " + std::to_string(port) + ")); s.listen(); time.sleep(30)'");
  ASSERT_GT(listener, 0);
  EXPECT_EQ(wait_bg(reader, 10s), 0) << "the reader of port " << port << " was not answered";
  const json r = answer(out);
  EXPECT_EQ(r["ready"], true) << r.dump();
  EXPECT_EQ(r["matched"], (json{{"kind", "port"}, {"port", port}})) << r.dump();
  EXPECT_EQ(status_json(id)["ready"], false) << "the record's condition is another";
  ::kill(listener, SIGKILL);
  wait_bg(listener, 5s);
}

TEST_F(ReadyReadersTest, OnceReadyANewRecordConditionChangesNothing) {
  std::string id = start(R"({"cmd": "echo up; sleep 30", "readyLog": "^up$"})");
  ASSERT_FALSE(id.empty());
  json first = cat_json("procs/" + id + "/ready");
  ASSERT_EQ(first["ready"], true);
  ASSERT_EQ(write_file(p("procs/" + id + "/ready"), "log NEVER\n"), 0);
  json st = status_json(id);
  EXPECT_EQ(st["ready"], true);
  EXPECT_EQ(st["readyWhen"], "log ^up$");
  EXPECT_EQ(st["readyAt"], first["readyAt"]);
  EXPECT_EQ(cat_json("procs/" + id + "/ready")["ready"], true);
}

TEST_F(ReadyReadersTest, ConditionsInTheNameWithStreamsAndPortsSayWhatMatched) {
  const int port = free_port();
  std::string id = start("echo out-line; echo err-line >&2; exec python3 -c 'import socket,time\n"
                         "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                         "s.bind((\"127.0.0.1\", " + std::to_string(port) + ")); s.listen(); time.sleep(30)'");
  ASSERT_FALSE(id.empty());
  json err = cat_json("procs/" + id + "/ready,readyLog=line$,readyLogStream=stderr");
  EXPECT_EQ(err["matched"]["stream"], "stderr");
  EXPECT_EQ(err["matched"]["text"], "err-line");
  json out = cat_json("procs/" + id + "/ready,readyLog=line$,readyLogStream=stdout");
  EXPECT_EQ(out["matched"]["stream"], "stdout");
  EXPECT_EQ(out["matched"]["text"], "out-line");
  json both = cat_json("procs/" + id + "/ready,readyLog=^err");
  EXPECT_EQ(both["matched"]["text"], "err-line");
  json port_ready = cat_json("procs/" + id + "/ready,readyPort=" + std::to_string(port));
  EXPECT_EQ(port_ready["ready"], true);
  EXPECT_EQ(port_ready["matched"], (json{{"kind", "port"}, {"port", port}}));
  EXPECT_FALSE(status_json(id).contains("readyWhen"));
}

TEST_F(ReadyReadersTest, HttpStatusAndIntervalFromA503Then200Server) {
  const int port = free_port();
  const std::string gate = dir_ + "/healthy";
  ASSERT_TRUE(write_http_server());
  json req = {{"argv", {python_path(), dir_ + "/server.py", std::to_string(port), gate}},
              {"readyPort", port}, {"readyHttp", "/health"}, {"readyHttpStatus", 200}, {"readyIntervalMs", 20}};
  std::string id = start(req.dump());
  ASSERT_FALSE(id.empty());
  // 503 is not 200: not ready, probed every 20 ms (the default backoff would be at 1 s by now).
  ASSERT_TRUE(wait_until([&] { return log(id).find("probe 503") != std::string::npos; }, 10s));
  json capped = cat_json("procs/" + id + "/ready,timeoutSec=1");
  EXPECT_EQ(capped["ready"], false);
  std::size_t probes = 0;
  for (std::size_t at = 0; (at = log(id).find("probe 503", at)) != std::string::npos; ++at) ++probes;
  EXPECT_GE(probes, 15u) << log(id);
  ASSERT_EQ(write_file(gate, "", O_WRONLY | O_CREAT), 0);
  json r = cat_json("procs/" + id + "/ready");
  EXPECT_EQ(r["ready"], true);
  EXPECT_EQ(r["matched"], (json{{"kind", "http"}, {"port", port}, {"path", "/health"}, {"status", 200}}));
  EXPECT_EQ(status_json(id)["readyWhen"], "http " + std::to_string(port) + " /health 200");
}

TEST_F(ReadyReadersTest, ReadersOfTheRecordsHttpConditionAddNoProbes) {
  // Ten readers wait on the record's condition: the server sees the
  // record's one series of tries (every 200 ms), not eleven.
  const int port = free_port();
  const std::string gate = dir_ + "/healthy";
  ASSERT_TRUE(write_http_server());
  json req = {{"argv", {python_path(), dir_ + "/server.py", std::to_string(port), gate}},
              {"readyPort", port}, {"readyHttp", "/"}, {"readyIntervalMs", 200}};
  const std::string id = start(req.dump());
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id).find("probe 503") != std::string::npos; }, 10s));
  std::vector<pid_t> readers;
  for (int i = 0; i < 10; ++i) {
    readers.push_back(spawn_bg("exec cat \"$MNT/procs/" + id + "/ready\"", dir_ + "/reader" + std::to_string(i)));
    ASSERT_GT(readers.back(), 0);
  }
  for (pid_t r : readers)
    ASSERT_TRUE(wait_until([&] { return read_file("/proc/" + std::to_string(r) + "/wchan").data == "request_wait_answer"; }, 5s));
  auto probes = [&] {
    const std::string l = log(id);
    std::size_t n = 0;
    for (std::size_t at = 0; (at = l.find("probe 503", at)) != std::string::npos; ++at) ++n;
    return n;
  };
  const std::size_t before = probes();
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return probes() >= before + 5; }, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 600ms) << "5 tries came faster than the record's 200 ms apart";
  ASSERT_EQ(write_file(gate, "", O_WRONLY | O_CREAT), 0);
  for (std::size_t i = 0; i < readers.size(); ++i) {
    EXPECT_EQ(wait_bg(readers[i], 10s), 0);
    const json r = parse_json(read_file(dir_ + "/reader" + std::to_string(i)).data);
    EXPECT_EQ(r["ready"], true) << r.dump();
    EXPECT_EQ(r["matched"]["kind"], "http") << r.dump();
  }
}

TEST_F(ReadyReadersTest, APromptWithoutNewlineIsReadyWhileItRuns) {
  std::string id = start(R"({"cmd": "printf partial-ready; sleep 30", "readyLog": "partial-ready$"})");
  ASSERT_FALSE(id.empty());
  json r = cat_json("procs/" + id + "/ready");
  EXPECT_EQ(r["ready"], true);
  EXPECT_EQ(r["stillRunning"], true);
  EXPECT_EQ(r["proc"]["state"], "running");
  EXPECT_EQ(r["matched"]["text"], "partial-ready");
}

TEST_F(ReadyReadersTest, AnEndedCommandsAnswerSaysItEnded) {
  std::string id = start(R"({"cmd": "sleep 0.2; printf done-ready", "readyLog": "done-ready"})");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  json r = cat_json("procs/" + id + "/ready");
  EXPECT_EQ(r["ready"], true);
  EXPECT_EQ(r["stillRunning"], false);
  EXPECT_EQ(r["proc"]["state"], "exited");
  EXPECT_EQ(r["proc"]["running"], false);
  // A reader blocked when the match came with the last bytes: the same.
  // (A last line longer than a prompt is matched at the end only.)
  std::string id2 = start(
      R"({"cmd": "sleep 0.3; head -c 70000 /dev/zero | tr -c x x; printf END", "readyLog": "END$"})");
  ASSERT_FALSE(id2.empty());
  json r2 = cat_json("procs/" + id2 + "/ready");
  EXPECT_EQ(r2["ready"], true);
  EXPECT_EQ(r2["stillRunning"], false) << r2.dump().substr(0, 2000);
  EXPECT_EQ(r2["proc"]["state"], "exited") << r2.dump().substr(0, 2000);
}

TEST_F(ReadyReadersTest, AReadersOwnLogConditionOnAnEndedCommandSearchesItsWholeLog) {
  const std::string id = start("echo READY; echo more >&2; printf 'name? '");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  // In the name: a line of stdout, and the last line without a newline.
  json r = cat_json("procs/" + id + "/ready,readyLog=READY");
  EXPECT_EQ(r["ready"], true) << r.dump();
  EXPECT_EQ(r["stillRunning"], false);
  EXPECT_EQ(r["matched"]["kind"], "log");
  EXPECT_EQ(r["matched"]["text"], "READY");
  EXPECT_EQ(r["matched"]["stream"], "stdout");
  EXPECT_TRUE(is_iso_time(r["readyAt"])) << r.dump();
  r = cat_json("procs/" + id + "/ready,readyLog=^name");
  EXPECT_EQ(r["ready"], true) << r.dump();
  EXPECT_EQ(r["matched"]["text"], "name? ");
  // The stream asked for is the one searched.
  r = cat_json("procs/" + id + "/ready,readyLog=more,readyLogStream=stdout");
  EXPECT_EQ(r["ready"], false) << r.dump();
  EXPECT_TRUE(r["matched"].is_null());
  // Written and read back on one open file.
  RunResult w = bash("exec 3<>\"$MNT/procs/$ID/ready\"; echo 'log ^more' >&3; cat <&3", 10, {{"ID", id}});
  ASSERT_EQ(w.code, 0) << w.err;
  r = parse_json(w.out);
  EXPECT_EQ(r["ready"], true) << w.out;
  EXPECT_EQ(r["matched"]["stream"], "stderr") << w.out;
  // What is not in the log, or a port nothing listens on: not ready, at once.
  r = cat_json("procs/" + id + "/ready,readyLog=NOWHERE");
  EXPECT_EQ(r["ready"], false);
  EXPECT_TRUE(r["readyAt"].is_null());
  r = cat_json("procs/" + id + "/ready,readyPort=" + std::to_string(free_port()));
  EXPECT_EQ(r["ready"], false);
  EXPECT_EQ(r["proc"]["state"], "exited");
}

TEST_F(ReadyReadersTest, ReadyFdFromAShellAndFromPython) {
  std::string sh = start(R"({"cmd": "echo starting; sleep 0.2; echo >&3; sleep 30", "readyFd": 3})");
  ASSERT_FALSE(sh.empty());
  json a = cat_json("procs/" + sh + "/ready");
  EXPECT_EQ(a["ready"], true);
  EXPECT_EQ(a["matched"], (json{{"kind", "notify"}}));
  EXPECT_EQ(status_json(sh)["readyWhen"], "fd 3");
  json req = {{"argv", {python_path(), "-c", "import os, time\ntime.sleep(0.2)\nos.write(5, b'ready\\n')\ntime.sleep(30)"}},
              {"readyFd", 5}};
  std::string py = start(req.dump());
  ASSERT_FALSE(py.empty());
  json b = cat_json("procs/" + py + "/ready");
  EXPECT_EQ(b["ready"], true);
  EXPECT_EQ(b["matched"]["kind"], "notify");
  EXPECT_TRUE(is_iso_time(b["readyAt"]));
  // A command that never says it is not ready: the cap answers.
  std::string quiet = start(R"({"cmd": "sleep 30", "readyFd": 3})");
  ASSERT_FALSE(quiet.empty());
  EXPECT_EQ(cat_json("procs/" + quiet + "/ready,timeoutSec=1")["ready"], false);
}

TEST_F(ReadyReadersTest, ReadyAtAfterADaemonKillAndRestartIsTheOutputsTime) {
  const std::string gate = dir_ + "/gate";
  std::string id = start(R"({"cmd": "while [ ! -e ')" + gate +
                         R"(' ]; do sleep 0.05; done; echo listening; sleep 30", "readyLog": "^listening$"})");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(write_file(gate, "", O_WRONLY | O_CREAT), 0);
  ASSERT_TRUE(wait_until([&] { return read_file(state_ + "/procs/" + id + "/log").data.find("listening") !=
                                      std::string::npos; }, 10s));
  ASSERT_TRUE(start_daemon());
  json r = cat_json("procs/" + id + "/ready");
  EXPECT_EQ(r["ready"], true);
  const std::string printed = event_time(id, "listening");
  ASSERT_FALSE(printed.empty());
  EXPECT_EQ(r["readyAt"], printed);
  EXPECT_EQ(status_json(id)["readyAt"], printed);
  // And once more: what was saved is kept.
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(start_daemon());
  EXPECT_EQ(status_json(id)["readyAt"], printed);
}

TEST_F(ReadyReadersTest, ReadyAndEndedWhileNoDaemonRanIsReadyAfterTheRestart) {
  // Ready (a log line; a readyFd's newline) and ended while the daemon was
  // down: the next daemon finds it in what the command left.
  const std::string gate = dir_ + "/gate";
  const std::string wait_gate = "while [ ! -e '" + gate + "' ]; do sleep 0.05; done; ";
  const std::string log_id = start(json({{"cmd", wait_gate + "echo READY; printf prompt"}, {"readyLog", "^READY$"}}).dump());
  const std::string end_id = start(json({{"cmd", wait_gate + "printf 'last words'"}, {"readyLog", "words$"}}).dump());
  const std::string fd_id = start(json({{"cmd", wait_gate + "echo >&3"}, {"readyFd", 3}}).dump());
  const std::string never = start(json({{"cmd", wait_gate + "echo nothing"}, {"readyLog", "^READY$"}}).dump());
  ASSERT_FALSE(log_id.empty() || end_id.empty() || fd_id.empty() || never.empty());
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_EQ(write_file(gate, "", O_WRONLY | O_CREAT), 0);
  for (const std::string& id : {log_id, end_id, fd_id, never})
    ASSERT_TRUE(wait_until([&] { return stat_errno(state_ + "/procs/" + id + "/exit.json") == 0; }, 10s)) << id;
  ASSERT_TRUE(start_daemon());
  auto ready_of = [&](const std::string& id) {
    json s;
    wait_until([&] { s = status_json(id); return s["ready"] == true; }, 5s);
    return s;
  };
  json s = ready_of(log_id);
  EXPECT_EQ(s["ready"], true) << s.dump();
  EXPECT_EQ(s["readyAt"], event_time(log_id, "READY"));
  EXPECT_EQ(cat_json("procs/" + log_id + "/ready")["matched"]["text"], "READY");
  s = ready_of(end_id);
  EXPECT_EQ(s["ready"], true) << "a last line without a newline: " << s.dump();
  EXPECT_EQ(s["readyAt"], event_time(end_id, "last words"));
  s = ready_of(fd_id);
  EXPECT_EQ(s["ready"], true) << s.dump();
  EXPECT_TRUE(is_iso_time(s["readyAt"]));
  EXPECT_EQ(cat_json("procs/" + fd_id + "/ready")["matched"]["kind"], "notify");
  EXPECT_EQ(status_json(never)["ready"], false);
  EXPECT_TRUE(wait_until([&] { return settled(state_ + "/procs/" + never + "/ready.json"); }, 5s))
      << "looked at once, and not again: " << read_file(state_ + "/procs/" + never + "/ready.json").data;
  // What was found is kept, and one not ready stays so.
  ASSERT_EQ(kill_daemon(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(start_daemon());
  EXPECT_EQ(status_json(log_id)["readyAt"], event_time(log_id, "READY"));
  EXPECT_EQ(status_json(never)["ready"], false);
}

TEST_F(ReadyReadersTest, AnEndSeenUnreadyIsNotLookedAtAgainByTheNextDaemon) {
  const std::string id = start(json({{"cmd", "echo nothing"}, {"readyLog", "^NEVER$"}}).dump());
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  const std::string saved = state_ + "/procs/" + id + "/ready.json";
  EXPECT_TRUE(wait_until([&] { return settled(saved); }, 5s))
      << read_file(saved).data;
  EXPECT_EQ(status_json(id)["ready"], false);
}

TEST_F(ReadyReadersTest, BadKeysAndValuesAreEinvalWithALineInErrors) {
  std::string id = start("sleep 30");
  ASSERT_FALSE(id.empty());
  struct Case {
    std::string rel, says;
  };
  for (const Case& c : std::vector<Case>{
           {"procs/" + id + "/ready,readyLog=(", "bad regular expression"},
           {"procs/" + id + "/ready,readyLogStream=both2", "readyLogStream"},
           {"procs/" + id + "/ready,readyIntervalMs=50", "readyIntervalMs"},
           {"procs/" + id + "/ready,readyIntervalMs=5", "out of range"},
           {"procs/" + id + "/ready,readyLog=x,readyPort=5", "readyPort"},
       }) {
    // The open fails, not only the read.
    errno = 0;
    const int fd = ::open(p(c.rel).c_str(), O_RDONLY);
    EXPECT_EQ(fd, -1) << c.rel;
    EXPECT_EQ(errno, EINVAL) << c.rel;
    if (fd >= 0) ::close(fd);
    RunResult r = run("cat \"$MNT/$REL\"", 10, {{"REL", c.rel}});
    EXPECT_NE(r.code, 0) << c.rel;
    EXPECT_NE(r.err.find("Invalid argument"), std::string::npos) << c.rel << ": " << r.err;
    const json e = error_about(c.rel);
    ASSERT_TRUE(e.is_object()) << "no line in errors for " << c.rel << ": " << json(errors()).dump();
    EXPECT_EQ(e["errno"], "EINVAL");
    EXPECT_NE(e.value("error", "").find(c.says), std::string::npos) << e.dump();
    // Which key: in the reason, and the name as the request.
    const std::string key = c.rel.substr(c.rel.find(',') + 1, c.rel.find('=') - c.rel.find(',') - 1);
    EXPECT_NE(e.value("error", "").find(key), std::string::npos) << e.dump();
    EXPECT_EQ(e["request"], c.rel.substr(c.rel.rfind('/') + 1)) << e.dump();
  }
  for (const char* bad : {R"({"readyFd": 3})", R"({"readyLog": "x", "readyLogStream": 1})", "http 80 / 700",
                          R"({"readyPort": 80, "readyHttp": "/", "readyHttpStatus": {"min": 1}})"}) {
    EXPECT_EQ(write_file(p("procs/" + id + "/ready"), std::string(bad) + "\n"), EINVAL) << bad;
    EXPECT_EQ(errors().back()["errno"], "EINVAL") << bad;
  }
  const auto before = procs();
  for (const char* bad : {R"({"cmd": "true", "readyFd": 2})", R"({"cmd": "true", "readyFd": "3"})",
                          R"({"cmd": "true", "readyPort": 80, "readyHttp": "/", "readyHttpStatus": 700})",
                          R"({"cmd": "true", "readyIntervalMs": 20})"}) {
    EXPECT_EQ(write_file(p("cmd"), std::string(bad) + "\n"), EINVAL) << bad;
    EXPECT_EQ(errors().back()["errno"], "EINVAL") << bad;
  }
  EXPECT_EQ(procs(), before);
}

}  // namespace
}  // namespace sbxit
