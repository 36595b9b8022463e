// Past log_max: every view keeps the first half of log_max and the latest
// output up to the other half, with the marker line between them; tail,
// logTail and output show what the command printed last; the state
// directory stays bounded; followers, a daemon restart and secrets.
#include <dirent.h>
#include <sys/stat.h>

#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

constexpr std::size_t kMax = 65536, kHead = kMax / 2;
const std::string kMarkerStart = "[sbxfs: log_max (65536 bytes) reached:";

/// What `seq 1 N` prints.
std::string seq(int n) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += std::to_string(i) + "\n";
  return s;
}

/// Lines "WORD 0" to "WORD N-1".
std::string numbered(const std::string& word, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += word + " " + std::to_string(i) + "\n";
  return s;
}

/// `text` split at marker lines. A marker follows a newline of its own
/// unless the bytes before it end a line, so a piece's last newline may be
/// the marker's: it is left out (a piece is then still a part of the output).
std::vector<std::string> pieces(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const std::size_t m = text.find(kMarkerStart, at);
    if (m == std::string::npos) break;
    const std::size_t cut = m > at && text[m - 1] == '\n' ? m - 1 : m;
    out.push_back(text.substr(at, cut - at));
    at = text.find('\n', m) + 1;
  }
  out.push_back(text.substr(at));
  return out;
}

/// Bytes of data in stdout and stderr events.
std::size_t data_bytes(const std::vector<json>& ev) {
  std::size_t n = 0;
  for (const json& e : ev)
    if (e["type"] == "stdout" || e["type"] == "stderr") n += e["data"].get<std::string>().size();
  return n;
}

class LogTail : public SbxfsTest {
 protected:
  LogTail() { daemon_options_ = {"-o", "log_max=65536"}; }

  std::vector<json> events(const std::string& text) {
    std::vector<json> out;
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t nl = text.find('\n', at);
      out.push_back(json::parse(text.substr(at, nl - at)));
      at = nl == std::string::npos ? text.size() : nl + 1;
    }
    return out;
  }
  /// Bytes of the record's files in the state directory.
  std::uint64_t record_bytes(const std::string& id) {
    std::uint64_t total = 0;
    for (const std::string& name : list_dir(state_ + "/procs/" + id)) {
      struct stat st {};
      if (::stat((state_ + "/procs/" + id + "/" + name).c_str(), &st) == 0 && S_ISREG(st.st_mode))
        total += static_cast<std::uint64_t>(st.st_blocks) * 512;
    }
    return total;
  }
  /// One truncated event in `ev`, counting `dropped`.
  void expect_one_truncated(const std::vector<json>& ev, const json& dropped) {
    std::size_t truncated = 0;
    for (const json& e : ev)
      if (e["type"] == "truncated") {
        ++truncated;
        EXPECT_EQ(e["droppedBytes"], dropped);
      }
    EXPECT_EQ(truncated, 1u);
  }
  /// Each piece between markers is a part of `truth`, in order.
  void expect_coherent(const std::string& text, const std::string& truth, const std::string& what) {
    std::size_t from = 0;
    for (const std::string& piece : pieces(text)) {
      const std::size_t at = truth.find(piece, from);
      ASSERT_NE(at, std::string::npos) << what << ": a piece is not the output (" << piece.substr(0, 80) << "...)";
      from = at + piece.size();
    }
  }
};

TEST_F(LogTail, NumberedLinesWellPastTheCap) {
  const std::string truth = seq(100000);
  const std::string id = start("seq 1 100000");
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id);
  ASSERT_EQ(w["proc"]["exitCode"], 0) << w.dump();
  EXPECT_TRUE(w["proc"]["logTail"].get<std::string>().ends_with("99999\n100000\n")) << w["proc"]["logTail"];
  EXPECT_TRUE(file("procs/" + id + "/tail").ends_with("\n99999\n100000\n"));

  const std::string log = this->log(id);
  ASSERT_EQ(log.substr(0, kHead), truth.substr(0, kHead)) << "the first half of log_max";
  const std::vector<std::string> parts = pieces(log);
  ASSERT_EQ(parts.size(), 2u) << "one marker";
  const std::string kept = parts[1];
  EXPECT_GE(kept.size(), kMax / 4);
  EXPECT_LE(kept.size(), kMax / 2);
  EXPECT_TRUE(truth.ends_with(kept)) << "the latest output";
  EXPECT_LE(log.size(), kMax + 200);
  EXPECT_EQ(file("procs/" + id + "/stdout"), log) << "one stream: stdout is the log";
  EXPECT_EQ(file("logs/" + id + ".log"), log);
  EXPECT_EQ(file("procs/" + id + "/log,follow"), log);
  struct stat st {};
  ASSERT_EQ(::stat(p("procs/" + id + "/log").c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), log.size()) << "its size is the view's";
  const std::string stamped = file("procs/" + id + "/log,timestamps");
  EXPECT_NE(stamped.find(kMarkerStart), std::string::npos);
  EXPECT_TRUE(stamped.ends_with(" 100000\n"));

  const json s = status_json(id);
  EXPECT_EQ(s["truncated"], true);
  const std::uint64_t dropped = truth.size() - kHead - kept.size();
  EXPECT_EQ(s["droppedBytes"], dropped);

  const json out = json::parse(file("procs/" + id + "/output"));
  EXPECT_TRUE(out["stdout"].get<std::string>().ends_with("99999\n100000\n"));
  EXPECT_EQ(out["truncated"], true);

  // events: the head's data, one truncated event, the tail's data, terminal.
  const std::vector<json> ev = events(file("procs/" + id + "/events"));
  ASSERT_GE(ev.size(), 4u);
  std::string before, after;
  std::size_t truncated = 0, at = 0;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const std::string type = ev[i]["type"];
    if (type == "truncated") {
      ++truncated;
      at = i;
      EXPECT_EQ(ev[i]["droppedBytes"], dropped);
    } else if (type == "stdout") {
      (truncated ? after : before) += ev[i]["data"].get<std::string>();
    }
  }
  EXPECT_EQ(truncated, 1u);
  EXPECT_EQ(before, truth.substr(0, kHead));
  EXPECT_EQ(after, kept);
  EXPECT_EQ(ev.back()["type"], "terminal");
  // Cursors resume across the cut.
  const std::vector<json> from_cut = events(file("procs/" + id + "/events,since=" + ev[at]["cursor"].get<std::string>()));
  ASSERT_FALSE(from_cut.empty());
  EXPECT_EQ(from_cut[0], ev[at + 1]);
  const std::vector<json> from_head =
      events(file("procs/" + id + "/events,since=" + ev[at - 1]["cursor"].get<std::string>()));
  ASSERT_FALSE(from_head.empty());
  EXPECT_EQ(from_head[0], ev[at]);
  // A cursor of a chunk that was dropped: the next events that exist.
  const std::string c = ev[at]["cursor"];
  const std::string run = c.substr(0, c.find('-'));
  const std::uint64_t n = std::stoull(c.substr(c.find('-') + 1));
  const std::vector<json> from_gone = events(file("procs/" + id + "/events,since=" + run + "-" + std::to_string(n - 1)));
  ASSERT_FALSE(from_gone.empty());
  EXPECT_EQ(from_gone[0]["type"], "truncated");
  EXPECT_EQ(from_gone[1], ev[at + 1]);
}

TEST_F(LogTail, TwoStreamsEachKeepTheirOwnHeadAndTail) {
  // The head is the log's first half of log_max, whichever stream wrote it:
  // the loop waits until the monitor took the first line of each in (it
  // might else read 32 KiB of stdout first, and stderr would then begin
  // with the marker, rightly).
  const std::string id = start(
      "echo 'out 0'; echo 'err 0' >&2; "
      "while [ $(wc -c < \"$SBX_MOUNT/procs/$SBX_BGID/log\") -lt 12 ]; do sleep 0.01; done; "
      "i=1; while [ $i -lt 8000 ]; do echo \"out $i\"; echo \"err $i\" >&2; i=$((i+1)); done");
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 60);
  ASSERT_EQ(w["proc"]["exitCode"], 0) << w.dump();
  const std::string out = file("procs/" + id + "/stdout"), err = file("procs/" + id + "/stderr");
  EXPECT_TRUE(out.starts_with("out 0\n")) << out.substr(0, 200);
  EXPECT_TRUE(err.starts_with("err 0\n")) << err.substr(0, 200);
  EXPECT_TRUE(out.ends_with("out 7999\n"));
  EXPECT_TRUE(err.ends_with("err 7999\n"));
  expect_coherent(out, numbered("out", 8000), "stdout");
  expect_coherent(err, numbered("err", 8000), "stderr");
  EXPECT_EQ(pieces(out).size(), 2u);
  EXPECT_EQ(pieces(err).size(), 2u);
  EXPECT_LE(file("procs/" + id + "/log").size(), kMax + 200);
  const json o = json::parse(file("procs/" + id + "/output"));
  EXPECT_TRUE(o["stdout"].get<std::string>().ends_with("out 7999\n"));
  EXPECT_TRUE(o["stderr"].get<std::string>().ends_with("err 7999\n"));
  EXPECT_TRUE(file("procs/" + id + "/tail").ends_with("7999\n"));
}

TEST_F(LogTail, BothStreamsKeepTheirEndWhenTheMonitorFindsBothPipesFull) {
  // The monitor away (a loaded machine; SIGSTOP here) while the command
  // writes 45 KB to each stream, more than the tail keeps: the last output
  // of both must be in the tail, however the monitor takes the two pipes
  // (it once read each whole, one after the other: the first one's end was
  // pushed out by the other's, and stdout ended at the marker).
  const std::string go = dir_ + "/go", done = dir_ + "/done";
  const std::string lines = "do echo \"out $i\"; echo \"err $i\" >&2; i=$((i+1)); done; ";
  const std::string id = start("i=0; while [ $i -lt 4000 ]; " + lines + "while [ ! -e '" + go +
                               "' ]; do sleep 0.01; done; while [ $i -lt 9000 ]; " + lines + ": > '" + done + "'");
  ASSERT_FALSE(id.empty());
  // The tail has begun and the monitor has read all of the first part.
  ASSERT_TRUE(wait_until(
      [&] {
        return file("procs/" + id + "/stdout").ends_with("out 3999\n") &&
               file("procs/" + id + "/stderr").ends_with("err 3999\n");
      },
      20s));
  const pid_t monitor = parse_json(read_file(state_ + "/procs/" + id + "/monitor.json").data)["monitorPid"];
  ASSERT_EQ(::kill(monitor, SIGSTOP), 0);
  struct Cont {
    pid_t pid;
    ~Cont() { ::kill(pid, SIGCONT); }
  } cont{monitor};
  ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT), 0);
  ASSERT_TRUE(wait_until([&] { return ::access(done.c_str(), F_OK) == 0; }, 20s)) << "the command is blocked";
  ASSERT_EQ(::kill(monitor, SIGCONT), 0);
  const json w = wait_json(id, 30);
  ASSERT_EQ(w["proc"]["exitCode"], 0) << w.dump();
  const std::string out = file("procs/" + id + "/stdout"), err = file("procs/" + id + "/stderr");
  EXPECT_TRUE(out.ends_with("out 8999\n")) << out.substr(out.size() > 200 ? out.size() - 200 : 0);
  EXPECT_TRUE(err.ends_with("err 8999\n")) << err.substr(err.size() > 200 ? err.size() - 200 : 0);
  const json o = json::parse(file("procs/" + id + "/output"));
  EXPECT_TRUE(o["stdout"].get<std::string>().ends_with("out 8999\n"));
  EXPECT_TRUE(o["stderr"].get<std::string>().ends_with("err 8999\n"));
  expect_coherent(out, numbered("out", 9000), "stdout");
  expect_coherent(err, numbered("err", 9000), "stderr");
}

TEST_F(LogTail, FollowersStartedBeforeTheCapSeeACoherentStreamAndEnd) {
  const std::string go = dir_ + "/go";
  const std::string id = start("echo start; while [ ! -e '" + go + "' ]; do sleep 0.01; done; seq 1 60000; echo end");
  ASSERT_FALSE(id.empty());
  const std::string base = "\"$MNT/procs/" + id + "/";
  const pid_t log_f = spawn_bg("cat " + base + "log,follow\" > " + dir_ + "/log.out");
  const pid_t ev_f = spawn_bg("cat " + base + "events,follow\" > " + dir_ + "/ev.out");
  ASSERT_TRUE(wait_until([&] { return read_file(dir_ + "/log.out").data == "start\n"; }, 5s));
  ASSERT_TRUE(wait_until([&] { return read_file(dir_ + "/ev.out").data.find("start") != std::string::npos; }, 5s));
  ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT), 0);
  wait_json(id, 30);
  for (pid_t f : {log_f, ev_f}) EXPECT_EQ(wait_bg(f, 5s), 0) << "a follower ends by itself";
  const std::string truth = "start\n" + seq(60000) + "end\n";
  const std::string followed = read_file(dir_ + "/log.out").data;
  EXPECT_TRUE(followed.starts_with("start\n1\n"));
  EXPECT_TRUE(followed.ends_with("60000\nend\n"));
  expect_coherent(followed, truth, "log,follow");
  std::string data;
  std::vector<json> ev = events(read_file(dir_ + "/ev.out").data);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back()["type"], "terminal");
  for (const json& e : ev) {
    if (e["type"] == "stdout") data += e["data"].get<std::string>();
    if (e["type"] == "truncated") data += kMarkerStart + "]\n";
  }
  expect_coherent(data, truth, "events,follow");
  EXPECT_TRUE(data.ends_with("60000\nend\n"));
}

// A follower that had read into the tail, then fell behind while the
// tail moved on: its marker follows the last line it read with no empty
// line between (the last byte it was given is gone from the log by then,
// and it was sent without a copy, so it is remembered at the read). What
// is kept after a marker may begin with the newline that ended a dropped
// line (the tail begins where a read of the pipe began), so an empty line
// after a marker is the output's.
TEST_F(LogTail, AFollowerThatFallsBehindInTheTailGetsItsMarkerAfterItsLastLine) {
  const std::string id = start("seq 1 8000; while [ ! -e \"$T/go1\" ]; do sleep 0.01; done; seq 8001 200000; "
                               "touch \"$T/printed\"; while [ ! -e \"$T/go2\" ]; do sleep 0.01; done; echo end");
  ASSERT_FALSE(id.empty());
  auto r = python(R"(
import os
t, s = os.environ['T'], os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/'
fds = {v: os.open(s + v + ',follow', os.O_RDONLY) for v in ('stdout', 'log')}
first = len(''.join('%d\n' % i for i in range(1, 8001)))  # past the head (32 KiB)
got = {v: b'' for v in fds}
for v, fd in fds.items():
    while len(got[v]) < first: got[v] += os.read(fd, min(4096, first - len(got[v])))  # as cat reads
open(t + '/go1', 'w').close()
while not os.path.exists(t + '/printed'): os.sched_yield()
open(t + '/go2', 'w').close()
for v, fd in fds.items():
    while True:
        b = os.read(fd, 4096)
        if not b: break
        got[v] += b
    open(t + '/' + v + '.out', 'wb').write(got[v])
)", 60, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  // (More than one marker when the monitor still relays what seq printed
  // while the reader reads on: it falls behind again.)
  const std::string truth = seq(200000) + "end\n";
  for (const std::string v : {"stdout", "log"}) {
    const std::string text = read_file(dir_ + "/" + v + ".out").data;
    EXPECT_NE(text.find(kMarkerStart), std::string::npos) << v << ": a marker";
    for (std::size_t m = text.find(kMarkerStart); m != std::string::npos; m = text.find(kMarkerStart, m + 1)) {
      ASSERT_GE(m, 2u);
      EXPECT_EQ(text[m - 1], '\n') << v << ": the marker is a line of its own";
      // (Unless the line before it is what followed an earlier marker: a
      // dropped line's newline.)
      EXPECT_TRUE(text[m - 2] != '\n' || (m >= 3 && text[m - 3] == ']'))
          << v << ": no empty line before the marker: "
                                   << text.substr(m > 40 ? m - 40 : 0, 60);
    }
    EXPECT_TRUE(text.ends_with("199999\n200000\nend\n")) << v << ": its end";
    expect_coherent(text, truth, v);
  }
}

TEST_F(LogTail, TheStateDirectoryStaysBounded) {
  const std::string id = start("head -c " + std::to_string(50 * kMax) + " /dev/zero | tr '\\0' y");
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 30);
  const std::string log = this->log(id);
  const std::vector<std::string> parts = pieces(log);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0], std::string(kHead, 'y'));
  EXPECT_EQ(w["proc"]["droppedBytes"], 50 * kMax - kHead - parts[1].size());
  EXPECT_LE(record_bytes(id), kMax + 64 * 1024) << "about log_max and a few small files";
}

TEST_F(LogTail, ADaemonKilledMidOutputComesBackCoherent) {
  extend_watchdog(std::chrono::seconds(30));
  const std::string go = dir_ + "/go";
  const std::string id = start("i=0; while [ ! -e '" + go + "' ]; do echo \"line $i\"; i=$((i+1)); done; echo done");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return status_json(id).value("droppedBytes", 0) > 0; }, 20s));
  ASSERT_TRUE(restart_daemon());
  // Read while the tail rotates: a reader slower than the command may meet more gaps.
  const std::string mid = log(id);
  EXPECT_GE(pieces(mid).size(), 2u);
  EXPECT_TRUE(mid.starts_with("line 0\nline 1\n"));
  EXPECT_TRUE(status_json(id)["truncated"] == true);
  ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT), 0);
  const json w = wait_json(id, 20);
  ASSERT_EQ(w["proc"]["exitCode"], 0) << w.dump();
  const std::string log = this->log(id);
  const std::vector<std::string> parts = pieces(log);
  ASSERT_EQ(parts.size(), 2u);
  ASSERT_TRUE(parts[1].ends_with("\ndone\n"));
  // The last line number says how much the command printed in all.
  const std::string body = parts[1].substr(0, parts[1].size() - 5);
  const std::size_t last_nl = body.rfind('\n', body.size() - 2);
  const int last = std::stoi(body.substr(last_nl + 1 + 5));
  std::string truth;
  for (int i = 0; i <= last; ++i) truth += "line " + std::to_string(i) + "\n";
  truth += "done\n";
  expect_coherent(log, truth, "log");
  const std::vector<json> ev = events(file("procs/" + id + "/events"));
  EXPECT_EQ(w["proc"]["droppedBytes"], truth.size() - data_bytes(ev)) << "what is gone, across the restart";
  expect_one_truncated(ev, w["proc"]["droppedBytes"]);
}

TEST_F(LogTail, AMonitorKilledMidRotationLeavesACoherentRecord) {
  const std::string id = start("i=0; while :; do echo \"line $i\"; i=$((i+1)); done");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return status_json(id).value("droppedBytes", 0) > 0; }, 20s));
  const json mon = parse_json(read_file(state_ + "/procs/" + id + "/monitor.json").data);
  ASSERT_EQ(::kill(mon["monitorPid"].get<pid_t>(), SIGKILL), 0);  // at whatever point of its writes
  const json w = wait_json(id, 20);
  EXPECT_EQ(w["proc"]["endReason"], "unknown") << w.dump();
  const std::string log = this->log(id);
  const std::vector<std::string> parts = pieces(log);
  ASSERT_EQ(parts.size(), 2u);
  // The last whole line says how far the command got; the kill may have
  // cut the one after it anywhere, even inside its "line " (the next one,
  // a prefix of which truth has below).
  const std::string whole = parts[1].substr(0, parts[1].rfind('\n') + 1);
  ASSERT_GE(whole.size(), 2u) << parts[1];
  const std::size_t end = whole.rfind('\n', whole.size() - 2);
  const int last = std::stoi(whole.substr(end + 1 + 5)) + 1;
  std::string truth;
  for (int i = 0; i <= last; ++i) truth += "line " + std::to_string(i) + "\n";
  expect_coherent(log, truth, "log");
  const std::vector<json> ev = events(file("procs/" + id + "/events"));
  expect_one_truncated(ev, w["proc"]["droppedBytes"]);
  EXPECT_EQ(ev.back()["type"], "terminal");
  EXPECT_EQ(file("procs/" + id + "/stdout"), log);
}

TEST_F(LogTail, SecretsAreMaskedInTheTail) {
  const std::string id = start(json{{"cmd", "seq 1 20000; i=0; while [ $i -lt 3000 ]; do echo \"key=$TOKEN\"; "
                                            "i=$((i+1)); done"},
                                    {"secretEnv", {{"TOKEN", "s3cr3tvalue"}}}}.dump());
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 30);
  ASSERT_EQ(w["proc"]["truncated"], true);
  const std::string logtail = w["proc"]["logTail"];
  EXPECT_EQ(logtail.find("s3cr3t"), std::string::npos);
  EXPECT_NE(logtail.find("key=***"), std::string::npos);
  for (const char* v : {"tail", "log", "stdout", "events", "output", "log,timestamps", "log,follow"}) {
    const std::string text = file(std::string("procs/") + id + "/" + v);
    EXPECT_EQ(text.find("s3cr3t"), std::string::npos) << v;
    EXPECT_EQ(text.find("3tvalue"), std::string::npos) << v;
  }
}

// A secret that the gap cuts, with its part on either side in more than
// one chunk: log_max 1024 keeps a head of 512 bytes, tail segments of 256,
// and the monitor reads at most 128 bytes at a time, so the three writes
// below (each read apart, 0.3 s after the last) leave the head ending with
// "QxZ" | "kWm" and the kept bytes beginning with "Wm" | "RpJvHg". A view
// that masked each chunk alone showed those pieces.
class LogGapSecrets : public SbxfsTest {
 protected:
  LogGapSecrets() { daemon_options_ = {"-o", "log_max=1024"}; }
};

TEST_F(LogGapSecrets, APartCutAcrossChunksIsMaskedInEveryView) {
  const std::string secret = "QxZkWmRpJvHg";
  const std::string writer =
      "import os, sys, time\n"
      "S = sys.argv[1].encode()\n"
      "def w(b):\n"
      "    os.write(1, b)\n"
      "    time.sleep(0.3)\n"
      "w(b'x' * 505 + b'\\n' + S[:3])\n"
      "w(S[3:] + b'\\n' + b'y' * 500 + b'\\n' + S[:6])\n"
      "w(S[6:] + b'\\n' + b'z' * 346 + b'\\n')\n";
  const std::string id =
      start(json{{"argv", {"python3", "-c", writer, secret}}, {"secretEnv", {{"TOKEN", secret}}}}.dump());
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id, 30);
  ASSERT_EQ(w["proc"]["truncated"], true) << w.dump();
  for (const char* v : {"events", "log,timestamps", "stdout,timestamps", "log", "stdout", "output", "tail"}) {
    const std::string text = file(std::string("procs/") + id + "/" + v);
    ASSERT_FALSE(text.empty()) << v;
    for (std::size_t i = 0; i + 2 <= secret.size(); ++i)
      EXPECT_EQ(text.find(secret.substr(i, 2)), std::string::npos) << v << ": " << secret.substr(i, 2) << "\n" << text;
  }
}

}  // namespace
}  // namespace sbxit
