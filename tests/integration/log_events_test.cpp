// The log as a stream of events: stdout and stderr served from the log's
// index, procs/ID/events (cursors, since=, follow, terminal), the
// `,follow` and `,timestamps` views, and secrets masked in all of them.
//
// The commands here write in steps that each wait until the monitor has
// put the previous one in the log (the writer watches the log's size), so
// the order of the chunks across the two pipes is known exactly.
#include <signal.h>
#include <sys/stat.h>

#include <set>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {


// Python that defines w(fd, bytes): a write that returns once the log holds it.
const char* kStepWriter = R"(
import os, sys, time
log = os.environ['STATE'] + '/procs/' + os.environ['SBX_BGID'] + '/log'
while not os.path.exists(log): time.sleep(0.001)
def w(fd, b):
    n = os.stat(log).st_size
    os.write(fd, b)
    while os.stat(log).st_size < n + len(b): os.sched_yield()  # the monitor may need this CPU
)";

class LogEvents : public SbxfsTest {
 protected:
  /// Starts `name` running python3 with kStepWriter followed by `code`.
  std::string start_py(const std::string& name, const std::string& code, json extra = json::object()) {
    json req = {{"name", name}, {"argv", {"python3", "-c", std::string(kStepWriter) + code}}, {"env", {{"STATE", state_}}}};
    for (auto& [k, v] : extra.items()) req[k] = v;
    return start(req.dump());
  }
  /// The lines of MNT/REL parsed.
  std::vector<json> events(const std::string& rel) {
    std::vector<json> out;
    const std::string text = file(rel);
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t nl = text.find('\n', at);
      out.push_back(json::parse(text.substr(at, nl - at)));
      at = nl == std::string::npos ? text.size() : nl + 1;
    }
    return out;
  }
};

TEST_F(LogEvents, TenThousandAlternationsKeepTheirOrderAndStreams) {
  extend_watchdog(std::chrono::seconds(60));
  const std::string id = start_py("alt", R"(
for i in range(10000):
    w(1, b'o%d\n' % i)
    w(2, b'e%d\n' % i)
)");
  ASSERT_FALSE(id.empty());
  const json done = wait_json(id, 60);
  ASSERT_EQ(done["proc"]["exitCode"], 0) << done.dump();
  const std::vector<json> ev = events("procs/alt/events");
  ASSERT_EQ(ev.size(), 20001u);
  std::string want_log, want_out, want_err;
  for (int i = 0; i < 10000; ++i) {
    const std::string o = "o" + std::to_string(i) + "\n", e = "e" + std::to_string(i) + "\n";
    want_log += o + e;
    want_out += o;
    want_err += e;
    const json& a = ev[2 * i];
    const json& b = ev[2 * i + 1];
    if (a["type"] != "stdout" || a["data"] != o || b["type"] != "stderr" || b["data"] != e)
      FAIL() << "event " << 2 * i << ": " << a.dump() << " " << b.dump();
  }
  EXPECT_EQ(ev.back()["type"], "terminal");
  EXPECT_EQ(ev.back()["exit"]["code"], 0);
  EXPECT_EQ(ev.back()["endReason"], "exited");
  EXPECT_EQ(log("alt"), want_log);
  EXPECT_EQ(file("procs/alt/stdout"), want_out);
  EXPECT_EQ(file("procs/alt/stderr"), want_err);
  // The bytes are in the state directory once: no stream files; a small index.
  struct stat st {};
  EXPECT_NE(::stat((state_ + "/procs/alt/stdout").c_str(), &st), 0);
  ASSERT_EQ(::stat((state_ + "/procs/alt/index").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 16 + 20000 * 24);
  // stat of the stream files gives their size.
  ASSERT_EQ(::stat(p("procs/alt/stdout").c_str(), &st), 0);
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), want_out.size());

  // Timestamps: monotone, within the run.
  const json rec = status_json("alt");
  const std::string started = rec["startedAt"], finished = rec["finishedAt"];
  std::string last = started;
  for (const json& e : ev) {
    const std::string t = e["timestamp"];
    EXPECT_TRUE(is_iso_time(e["timestamp"])) << t;
    EXPECT_LE(last, t);
    last = t;
  }
  EXPECT_LE(last, finished);
  // log,timestamps: each line prefixed by its time, in order; without them, the log.
  const std::string stamped = file("procs/alt/log,timestamps");
  std::string stripped, prev = started;
  std::size_t at = 0, lines = 0;
  while (at < stamped.size()) {
    const std::size_t nl = stamped.find('\n', at);
    const std::string line = stamped.substr(at, nl - at);
    ASSERT_GT(line.size(), 25u) << line;
    const std::string t = line.substr(0, 24);
    EXPECT_EQ(line[24], ' ') << line;
    EXPECT_LE(prev, t);
    prev = t;
    stripped += line.substr(25) + "\n";
    ++lines;
    at = nl + 1;
  }
  EXPECT_EQ(lines, 20000u);
  EXPECT_EQ(stripped, want_log);
  EXPECT_LE(prev, finished);
  const std::string out_stamped = file("procs/alt/stdout,timestamps");
  EXPECT_EQ(out_stamped.substr(24, 4), " o0\n") << out_stamped.substr(0, 60);
}

TEST_F(LogEvents, ResumingFromEveryHundredthCursorGivesExactlyTheRest) {
  const std::string id = start_py("res", R"(
for i in range(700):
    w(1 + i % 2, b'line %d\n' % i)
)");
  ASSERT_FALSE(id.empty());
  wait_json(id, 30);
  const std::vector<json> ev = events("procs/res/events");
  ASSERT_EQ(ev.size(), 701u);
  for (std::size_t k = 0; k < ev.size(); k += 100) {
    const std::vector<json> rest = events("procs/res/events,since=" + ev[k]["cursor"].get<std::string>());
    ASSERT_EQ(rest.size(), ev.size() - k - 1) << k;
    for (std::size_t i = 0; i < rest.size(); ++i) ASSERT_EQ(rest[i], ev[k + 1 + i]) << k << " " << i;
  }
  // After the terminal event: nothing.
  EXPECT_EQ(file("procs/res/events,since=" + ev.back()["cursor"].get<std::string>()), "");
}

TEST_F(LogEvents, ACursorFromBeforeAReRunOrNoCursorIsEinval) {
  ASSERT_FALSE(start(R"({"name": "again", "cmd": "echo one"})").empty());
  wait_json("again");
  const std::vector<json> first = events("procs/again/events");
  ASSERT_EQ(first.size(), 2u);
  const std::string cursor = first[0]["cursor"];
  EXPECT_EQ(json::parse(file("procs/again/events,since=" + cursor))["type"], "terminal");
  ASSERT_EQ(write_file(p("procs/again/cmd"), "echo two\n"), 0);
  ASSERT_TRUE(wait_until([&] { return status_json("again")["running"] == false; }, 10s));
  for (const std::string& bad : {cursor, std::string("garbage"), std::string("0-0")}) {
    const FileResult r = read_file(p("procs/again/events,since=" + bad));
    EXPECT_EQ(r.err, EINVAL) << bad;
  }
  bool logged = false;
  for (const json& e : errors())
    if (e.value("error", "").find("cursor from an earlier run") != std::string::npos) logged = true;
  EXPECT_TRUE(logged);
  const std::vector<json> second = events("procs/again/events");
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0]["data"], "two\n");
  EXPECT_NE(second[0]["cursor"], cursor);
  // Only a cursor as the events give it: one digit more or less, a sign, or
  // upper case is none; nor is one past the terminal event of an ended run.
  const std::string last = second[1]["cursor"];
  EXPECT_EQ(second[1]["type"], "terminal");
  const std::string run = last.substr(0, last.find('-'));
  std::string upper = run;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(read_file(p("procs/again/events,since=" + last)).data, "") << "after the last: nothing";
  for (const std::string& bad : {run + "--1", run + "-01", run + "-+1", upper + "-0", run + "-" + std::to_string(
                                     std::stoull(last.substr(last.find('-') + 1)) + 1)}) {
    if (bad == upper + "-0" && upper == run) continue;  // no letter in this run's id
    EXPECT_EQ(read_file(p("procs/again/events,since=" + bad)).err, EINVAL) << bad;
  }
  // What is no cursor at all fails the open (a cursor of another run, only
  // the read: which run it is of is known there).
  for (const std::string& bad : {std::string("garbage"), std::string("0-0"), run + "-01"}) {
    errno = 0;
    const int fd = ::open(p("procs/again/events,since=" + bad).c_str(), O_RDONLY);
    EXPECT_EQ(fd, -1) << bad;
    EXPECT_EQ(errno, EINVAL) << bad;
    if (fd >= 0) ::close(fd);
  }
  const int fd = ::open(p("procs/again/events,since=" + cursor).c_str(), O_RDONLY);
  EXPECT_GE(fd, 0) << "a cursor of the earlier run opens";
  if (fd >= 0) ::close(fd);
}

TEST_F(LogEvents, FollowersEndByThemselvesSoonAfterTheCommand) {
  const std::string go = dir_ + "/go";
  const std::string id = start("echo first; echo err >&2; while [ ! -e '" + go + "' ]; do sleep 0.01; done; echo last");
  ASSERT_FALSE(id.empty());
  const std::string base = "\"$MNT/procs/" + id + "/";
  const pid_t log_f = spawn_bg("cat " + base + "log,follow\" > " + dir_ + "/log.out");
  const pid_t out_f = spawn_bg("cat " + base + "stdout,follow\" > " + dir_ + "/out.out");
  const pid_t ev_f = spawn_bg("cat " + base + "events,follow\" > " + dir_ + "/ev.out");
  ASSERT_TRUE(wait_until([&] { return read_file(dir_ + "/ev.out").data.find("err") != std::string::npos; }, 5s));
  EXPECT_FALSE(wait_bg(log_f, 200ms)) << "a follower ended while the command runs";
  ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT), 0);
  wait_json(id);
  // Generous: the machine is shared; the end is an event, not a poll.
  for (pid_t f : {log_f, out_f, ev_f}) EXPECT_EQ(wait_bg(f, 3s), 0);
  EXPECT_EQ(read_file(dir_ + "/log.out").data, "first\nerr\nlast\n");
  EXPECT_EQ(read_file(dir_ + "/out.out").data, "first\nlast\n");
  const std::string ev = read_file(dir_ + "/ev.out").data;
  EXPECT_NE(ev.find("terminal"), std::string::npos) << ev;
  // An ended command's follow is a plain read.
  auto r = run("cat " + base + "log,follow\"", 5);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "first\nerr\nlast\n");
}

TEST_F(LogEvents, TimestampedViewsHaveTheirOwnLengthSoTailAndWcWork) {
  const std::string go = dir_ + "/go";
  const std::string id = start("echo first; echo err >&2; while [ ! -e '" + go + "' ]; do sleep 0.01; done; echo last");
  ASSERT_FALSE(id.empty());
  const std::string view = "\"$MNT/procs/" + id + "/log,timestamps\"";
  // tail -f polls the file's size (fstat) and reads what it grew by.
  const pid_t tail_f = spawn_bg("exec tail -f " + view + " > " + dir_ + "/tail.out");
  ASSERT_TRUE(wait_until([&] { return read_file(dir_ + "/tail.out").data.find("err") != std::string::npos; }, 10s));
  ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT), 0);
  wait_json(id);
  ASSERT_TRUE(wait_until([&] { return read_file(dir_ + "/tail.out").data.find("last") != std::string::npos; }, 10s))
      << read_file(dir_ + "/tail.out").data;
  ::kill(tail_f, SIGTERM);
  wait_bg(tail_f, 5s);
  const std::string whole = file("procs/" + id + "/log,timestamps");
  EXPECT_EQ(read_file(dir_ + "/tail.out").data, whole) << "tail -f saw each line once, and no truncation";
  auto r = run("wc -c < " + view + "; tail -n 1 " + view + "; stat -c %s " + view, 10);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string last_line = whole.substr(whole.rfind('\n', whole.size() - 2) + 1);
  EXPECT_EQ(r.out, std::to_string(whole.size()) + "\n" + last_line + std::to_string(whole.size()) + "\n");
  EXPECT_EQ(last_line.substr(last_line.size() - 6), " last\n") << last_line;
}

TEST_F(LogEvents, PollIsReadableOnlyWhenThereIsMore) {
  const std::string go = dir_ + "/go";
  const std::string id = start("while [ ! -e '" + go + "1' ]; do sleep 0.01; done; echo x; "
                               "while [ ! -e '" + go + "2' ]; do sleep 0.01; done");
  ASSERT_FALSE(id.empty());
  auto r = python(R"(
import os, select
m = os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/'
go = os.environ['GO']
out = []
for name in ('stdout,follow', 'events,follow', 'log,follow'):
    fd = os.open(m + name, os.O_RDONLY | os.O_NONBLOCK)
    p = select.poll(); p.register(fd, select.POLLIN)
    out.append(name + ' idle ' + str(len(p.poll(150))))
    try:
        os.read(fd, 100); out.append('read did not block')
    except BlockingIOError:
        out.append('EAGAIN')
    os.close(fd)
fds = {n: os.open(m + n, os.O_RDONLY) for n in ('stdout,follow', 'events,follow')}
open(go + '1', 'w').close()
for n, fd in fds.items():
    p = select.poll(); p.register(fd, select.POLLIN)
    out.append(n + ' output ' + str(len(p.poll(5000))))
    data = os.read(fd, 1 << 16)
    out.append(n + ' got ' + ('x' if b'x' in data else repr(data)))
    out.append(n + ' drained ' + str(len(p.poll(150))))
open(go + '2', 'w').close()
for n, fd in fds.items():
    p = select.poll(); p.register(fd, select.POLLIN)
    out.append(n + ' end ' + str(len(p.poll(5000))))
    rest = b''
    while True:
        b = os.read(fd, 1 << 16)
        if not b: break
        rest += b
    out.append(n + ' eof ' + ('terminal' if b'terminal' in rest else repr(rest)))
print('\n'.join(out))
)",
                  30, {{"ID", id}, {"GO", go}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "stdout,follow idle 0\nEAGAIN\nevents,follow idle 0\nEAGAIN\nlog,follow idle 0\nEAGAIN\n"
            "stdout,follow output 1\nstdout,follow got x\nstdout,follow drained 0\n"
            "events,follow output 1\nevents,follow got x\nevents,follow drained 0\n"
            "stdout,follow end 1\nstdout,follow eof b''\nevents,follow end 1\nevents,follow eof terminal\n");
}

TEST_F(LogEvents, ManyFollowersHoldNoThreadAndAnInterruptedOneIsReleased) {
  const std::string go = dir_ + "/go";
  const std::string id = start("while [ ! -e '" + go + "' ]; do sleep 0.01; done; echo end");
  ASSERT_FALSE(id.empty());
  // 200 followers at once (more than the daemon has threads), then every other file still answers.
  auto r = python(R"(
import os, threading, time
m = os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/'
fds = [os.open(m + ('log,follow' if i % 2 else 'events,follow'), os.O_RDONLY) for i in range(200)]
got = []
def rd(fd):
    b = os.read(fd, 1 << 16)
    got.append(b)
ts = [threading.Thread(target=rd, args=(fd,)) for fd in fds]
for t in ts: t.start()
time.sleep(0.3)
t0 = time.time(); s = open(os.environ['MNT'] + '/status.json').read(); dt = time.time() - t0
print('status', 'ok' if dt < 5 else dt, len(got))  # held threads would hold it until the go
open(os.environ['GO'], 'w').close()
for t in ts: t.join(10)
print('woken', len(got), all(got))
)",
                  30, {{"ID", id}, {"GO", go}});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "status ok 0\nwoken 200 True\n");
  // timeout interrupts a follower of a command that runs on: released at once.
  const std::string id2 = start("sleep 30");
  auto t = run("timeout 0.5 cat \"$MNT/procs/" + id2 + "/log,follow\"", 10);
  EXPECT_EQ(t.code, 124);
  EXPECT_LT(t.seconds, 3.0);
}

TEST_F(LogEvents, SplitCharactersAndBinaryBytes) {
  const std::string id = start_py("bin", R"(
w(1, b'\xc3'); w(1, b'\xa9\n')
e = '\U0001F600'.encode()
for b in e: w(1, bytes([b]))
w(1, b'\n')
w(2, b'\xff\xfeab\n')
w(1, b'tail\xe2\x82')
)");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  const std::vector<json> ev = events("procs/bin/events");
  std::string out;
  std::vector<std::string> b64;
  for (const json& e : ev) {
    if (e["type"] == "stdout") {
      if (e.contains("data")) out += e["data"].get<std::string>();
      else b64.push_back(e["dataBase64"]);
    }
    if (e["type"] == "stderr") b64.push_back(e.value("dataBase64", "(text)"));
  }
  EXPECT_EQ(out, "\xc3\xa9\n\xF0\x9F\x98\x80\ntail") << json(ev).dump();
  // Not UTF-8: stderr's bytes, and the cut character stdout ended with.
  ASSERT_EQ(b64.size(), 2u) << json(ev).dump();
  EXPECT_EQ(b64[0], "//5hYgo=");
  EXPECT_EQ(b64[1], "4oI=");
  EXPECT_EQ(ev.back()["type"], "terminal");
}

TEST_F(LogEvents, AFollowerResumesFromItsCursorAfterADaemonRestart) {
  const std::string go = dir_ + "/go";
  const std::string id = start("echo before; while [ ! -e '" + go + "' ]; do sleep 0.01; done; echo after");
  ASSERT_FALSE(id.empty());
  const pid_t f = spawn_bg("cat \"$MNT/procs/" + id + "/events,follow\" > " + dir_ + "/ev.out");
  ASSERT_TRUE(wait_until([&] { return read_file(dir_ + "/ev.out").data.find('\n') != std::string::npos; }, 5s));
  ASSERT_TRUE(restart_daemon());
  EXPECT_TRUE(wait_bg(f, 5s)) << "the follower did not end with the daemon";
  const json first = json::parse(read_file(dir_ + "/ev.out").data.substr(0, read_file(dir_ + "/ev.out").data.find('\n')));
  EXPECT_EQ(first["data"], "before\n");
  ASSERT_EQ(write_file(go, "", O_WRONLY | O_CREAT), 0);
  auto r = run("cat \"$MNT/procs/" + id + "/events,since=" + first["cursor"].get<std::string>() + ",follow\"", 10);
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<json> rest;
  for (std::size_t at = 0; at < r.out.size();) {
    const std::size_t nl = r.out.find('\n', at);
    rest.push_back(json::parse(r.out.substr(at, nl - at)));
    at = nl == std::string::npos ? r.out.size() : nl + 1;
  }
  ASSERT_EQ(rest.size(), 2u) << r.out;
  EXPECT_EQ(rest[0]["data"], "after\n");
  EXPECT_EQ(rest[1]["type"], "terminal");
}

TEST_F(LogEvents, SecretsAreMaskedInEveryView) {
  const std::string id = start_py("sec", R"(
w(1, b'key=s3cr'); w(1, b'3tvalue\n')
w(2, b's3cr3tvalue\n')
)", json{{"secretEnv", {{"TOKEN", "s3cr3tvalue"}}}});
  ASSERT_FALSE(id.empty());
  wait_json(id);
  for (const char* v : {"stdout", "stderr", "events", "log,timestamps", "stdout,timestamps",
                               "stderr,follow", "events,follow", "log,follow"}) {
    const std::string text = file(std::string("procs/sec/") + v);
    EXPECT_EQ(text.find("s3cr"), std::string::npos) << v << ": " << text;
    EXPECT_NE(text.find("***********"), std::string::npos) << v << ": " << text;
  }
}

// A record an older build left: log plus stream files of their own, no index.
TEST_F(LogEvents, ARecordOfAnOlderBuildIsReadFromItsStreamFiles) {
  const std::string id = start("echo out; echo err >&2");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  const std::string rec = state_ + "/procs/" + id;
  ASSERT_EQ(::unlink((rec + "/index").c_str()), 0);
  ASSERT_EQ(write_file(rec + "/stdout", "old out\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(write_file(rec + "/stderr", "old err\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  EXPECT_EQ(file("procs/" + id + "/stdout"), "old out\n");
  EXPECT_EQ(file("procs/" + id + "/stderr"), "old err\n");
  EXPECT_EQ(file("procs/" + id + "/log,follow"), "out\nerr\n");
  EXPECT_EQ(file("procs/" + id + "/stdout,follow"), "old out\n");
  EXPECT_EQ(read_file(p("procs/" + id + "/events")).err, ENODATA);
  EXPECT_EQ(read_file(p("procs/" + id + "/log,timestamps")).err, ENODATA);
  bool logged = false;
  for (const json& e : errors())
    if (e.value("error", "").find("older sbxfs") != std::string::npos) logged = true;
  EXPECT_TRUE(logged);
  const json out = json::parse(file("procs/" + id + "/output"));
  EXPECT_EQ(out["stdout"], "old out\n");
}

// An index cut inside its header (damaged on disk): the log is shown whole
// from its file, the views that need the index fail with EIO, and
// `errors` says why.
TEST_F(LogEvents, ADamagedIndexShowsTheWholeLogAndSaysWhy) {
  const std::string id = start("echo out; echo err >&2");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  ASSERT_EQ(::truncate((state_ + "/procs/" + id + "/index").c_str(), 10), 0);
  EXPECT_EQ(file("procs/" + id + "/log"), "out\nerr\n");
  EXPECT_EQ(file("logs/" + id + ".log"), "out\nerr\n");
  EXPECT_EQ(read_file(p("procs/" + id + "/stdout")).err, EIO);
  EXPECT_EQ(read_file(p("procs/" + id + "/log,timestamps")).err, EIO);
  std::set<std::string> said;
  for (const json& e : errors())
    if (e.value("error", "").find("index is damaged") != std::string::npos) said.insert(e.value("path", ""));
  EXPECT_EQ(said, (std::set<std::string>{"procs/" + id + "/log", "procs/" + id + "/stdout",
                                         "procs/" + id + "/log,timestamps"}));
}

TEST_F(LogEvents, BadKeysAreEinval) {
  const std::string id = start("echo hi");
  ASSERT_FALSE(id.empty());
  wait_json(id);
  EXPECT_EQ(read_file(p("procs/" + id + "/log,folow")).err, EINVAL);
  EXPECT_EQ(read_file(p("procs/" + id + "/events,since")).err, EINVAL);
  EXPECT_EQ(read_file(p("procs/" + id + "/events,follow=1")).err, EINVAL);
}

}  // namespace
}  // namespace sbxit
