// Readiness: log, port and http conditions, given at start or set later.
#include "supervisor/log_index.hpp"
#include "supervisor/ready_condition.hpp"
#include "../common/free_port.hpp"
#include "test_util.hpp"

namespace sbxtest {
namespace {

using sbxtest_common::free_port;

class ReadyTest : public SupervisorTest {
 protected:
  bool wait_ready(const std::string& id, std::chrono::milliseconds timeout = 10000ms) {
    return wait_until([&] { auto s = sup_->status(id); return s && s->ready; }, timeout, 10ms);
  }
  /// Starts `cmd` with condition `c` and waits until it is ready; its id, or "" (a failure).
  std::string start_ready(const std::string& cmd, const sup::ReadyCondition& c, const std::string& name = "") {
    auto spec = shell(cmd, name);
    spec.ready = c;
    auto st = sup_->start(spec);
    EXPECT_TRUE(st.ok()) << (st.ok() ? "" : describe(st.error()));
    if (!st.ok() || !wait_ready(st->bg_id)) return "";
    return st->bg_id;
  }
  sup::ReadyCondition cond(const std::string& text) {
    auto c = sup::parse_ready_condition(text);
    EXPECT_TRUE(c.ok()) << text;
    return c.ok() ? c.value() : sup::ReadyCondition{};
  }
};

TEST(ReadyConditionTest, ParsesWordsAndJson) {
  auto p = sup::parse_ready_condition("port 3000\n");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, sup::ReadyCondition::Kind::port);
  EXPECT_EQ(p->port, 3000);
  auto l = sup::parse_ready_condition("log ^Listening on .*:\\d+$");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->regex, "^Listening on .*:\\d+$");
  auto h = sup::parse_ready_condition("http 8080 /health");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->path, "/health");
  auto j = sup::parse_ready_condition(R"({"readyPort": 8080, "readyHttp": "/up"})");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->kind, sup::ReadyCondition::Kind::http);
  EXPECT_EQ(j->describe(), "http 8080 /up");
  // JSON may span lines; a trailing newline and blanks are no second line.
  auto pretty = sup::parse_ready_condition("{\n  \"readyLog\": \"up\"\n}\n");
  ASSERT_TRUE(pretty.ok());
  EXPECT_EQ(pretty->regex, "up");
  EXPECT_TRUE(sup::parse_ready_condition("log up \r\n").ok());
}

TEST(ReadyConditionTest, RejectsBadInputWithReasons) {
  for (const char* bad : {"port 0", "port 70000", "port x", "log (unclosed", "log", "http 80 health",
                          "listen 80", "", R"({"readyHttp": "/x"})", R"({"readyPort": "80"})",
                          R"({"bogus": 1})", "{not json", "log x\nlog y\n", "port 80\nport 81",
                          "log .{1000}.{1000}b", R"({"readyLog": "x", "readyLog": "y"})"}) {
    auto r = sup::parse_ready_condition(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, sup::Errc::invalid_argument) << bad;
    EXPECT_FALSE(r.error().message.empty()) << bad;
  }
}

TEST(ReadyConditionTest, ALogPatternTooComplexToSearchFastIsRefused) {
  EXPECT_TRUE(sup::parse_ready_condition("log .{1000}b").ok()) << "8005 instructions";
  auto r = sup::parse_ready_condition("log .{1000}.{1000}b");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("too complex: 16005 instructions, at most 10000"), std::string::npos)
      << r.error().message;
}

TEST_F(ReadyTest, LogLineSplitAcrossTwoWritesMatches) {
  auto spec = shell("printf 'serv'; sleep 0.2; printf 'er ready\\n'; sleep 30");
  spec.ready = cond("log server ready");
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok()) << describe(st.error());
  EXPECT_FALSE(st->ready);
  ASSERT_TRUE(wait_ready(st->bg_id));
  auto s = sup_->status(st->bg_id);
  EXPECT_FALSE(s->ready_at.empty());
  EXPECT_TRUE(s->running);
  EXPECT_EQ(s->to_json()["ready"], true);
}

TEST_F(ReadyTest, LinePrintedBeforeTheConditionWasSetCounts) {
  auto st = sup_->start(shell("echo 'db up'; echo later; sleep 30"));
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(wait_for_text(st->log_file, "later"));
  SBX_ASSERT_OK(sup_->set_ready(st->bg_id, cond("log ^db up$")));
  EXPECT_TRUE(wait_ready(st->bg_id));
}

TEST_F(ReadyTest, CommandEndingFirstIsNotReady) {
  auto spec = shell("echo nope; exit 4");
  spec.ready = cond("log never-printed");
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok());
  auto end = wait_ended(st->bg_id);
  ASSERT_TRUE(end);
  EXPECT_FALSE(end->ready);
  EXPECT_EQ(end->exit_code, 4);
  EXPECT_EQ(end->to_json()["ready"], false);
}

TEST_F(ReadyTest, LastLineWithoutNewlineCountsAtTheEnd) {
  auto spec = shell("printf 'done-no-newline'");
  spec.ready = cond("log done-no-newline");
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok());
  auto end = wait_ended(st->bg_id);
  ASSERT_TRUE(end);
  EXPECT_TRUE(end->ready);
}

TEST_F(ReadyTest, HostileRegexAndFourMebibyteLineStayFast) {
  // (a*)*b backtracks exponentially in std::regex; RE2 is linear.
  auto spec = shell("head -c 4194304 /dev/zero | tr '\\000' a; echo; echo aaab; sleep 30");
  spec.ready = cond("log ^(a*)*b$");
  auto t0 = Clock::now();
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(wait_ready(st->bg_id, 20000ms));
  EXPECT_LT(seconds_since(t0), 15.0);
}

TEST_F(ReadyTest, PortOpenedLate) {
  int port = free_port();
  const std::string gate = state_dir() + "/gate";  // the port opens once the test has looked
  auto spec = shell("while [ ! -e '" + gate + "' ]; do sleep 0.02; done; exec python3 -c 'import socket,time\n"
                    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                    "s.bind((\"127.0.0.1\", " + std::to_string(port) + ")); s.listen(); time.sleep(30)'");
  spec.ready = cond("port " + std::to_string(port));
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok()) << describe(st.error());
  EXPECT_FALSE(sup_->status(st->bg_id)->ready);
  write_file(gate, "");
  ASSERT_TRUE(wait_ready(st->bg_id));
}

TEST_F(ReadyTest, HttpAnswersOk) {
  int port = free_port();
  auto spec = shell("exec python3 -m http.server " + std::to_string(port) + " --bind 127.0.0.1");
  spec.ready = cond("http " + std::to_string(port) + " /");
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok()) << describe(st.error());
  ASSERT_TRUE(wait_ready(st->bg_id, 15000ms));
  EXPECT_EQ(sup_->status(st->bg_id)->ready_when, "http " + std::to_string(port) + " /");
}

TEST_F(ReadyTest, HttpErrorStatusIsNotReady) {
  int port = free_port();
  // http.server answers 404 for a missing path: not ready, the probe keeps trying.
  auto spec = shell("exec python3 -m http.server " + std::to_string(port) + " --bind 127.0.0.1");
  spec.ready = cond("http " + std::to_string(port) + " /no-such-file");
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(wait_for_text(st->log_file, "404", 15000ms));
  EXPECT_FALSE(sup_->status(st->bg_id)->ready);
}

TEST_F(ReadyTest, ReadyEventIsPublished) {
  std::atomic<int> ready_events{0};
  std::string id;
  std::mutex mu;
  auto token = sup_->subscribe([&](const sup::Event& e) {
    std::lock_guard g(mu);
    if (e.kind == sup::Event::Kind::ready && e.bg_id == id) ++ready_events;
  });
  {
    std::lock_guard g(mu);
    auto spec = shell("sleep 0.1; echo go; sleep 30");
    spec.ready = cond("log go");
    auto st = sup_->start(spec);
    ASSERT_TRUE(st.ok());
    id = st->bg_id;
  }
  EXPECT_TRUE(wait_until([&] { return ready_events.load() == 1; }, 10000ms));
  sup_->unsubscribe(token);
}

TEST_F(ReadyTest, SetReadyOnEndedCommandIsNoSuchProcess) {
  auto st = sup_->start(shell("true"));
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(wait_ended(st->bg_id));
  auto r = sup_->set_ready(st->bg_id, cond("port 80"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, sup::Errc::no_such_process);
}

TEST_F(ReadyTest, AReadersLogConditionOnAnEndedCommandIsSearchedAtOnce) {
  auto st = sup_->start(shell("echo READY; printf 'prompt> '"));
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(wait_ended(st->bg_id));
  std::vector<std::string> seen;  // on_ready runs in this thread, before the call returns
  auto found = [&](const sup::ReadyMatch& m) { seen.push_back(m.text); };
  auto a = sup_->probe_for_reader(st->bg_id, cond("log ^READY$"), found);
  auto b = sup_->probe_for_reader(st->bg_id, cond("log prompt"), found);
  auto c = sup_->probe_for_reader(st->bg_id, cond("log never-printed"), found);
  auto d = sup_->probe_for_reader(st->bg_id, cond("port 9"), found);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && d.ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"READY", "prompt> "}));
  for (auto t : {*a, *b, *c, *d}) EXPECT_EQ(t, 0u) << "no probe is left to cancel";
  // A command that never started has nothing to search.
  auto q = sup_->probe_for_reader("nosuch", cond("log READY"), found);
  ASSERT_FALSE(q.ok());
}

TEST_F(ReadyTest, ReadinessSurvivesReopen) {
  auto spec = shell("echo up; sleep 30", "srv");
  spec.ready = cond("log up");
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok());
  ASSERT_TRUE(wait_ready("srv"));
  reopen();
  auto s = sup_->status("srv");
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->ready);
  EXPECT_EQ(s->ready_when, "log up");
}

TEST(ReadyConditionTest, TheNewKeysParseAndTheirMistakesAreSaid) {
  auto h = sup::parse_ready_condition("http 3000 /health 200-299");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->status_min, 200);
  EXPECT_EQ(h->status_max, 299);
  EXPECT_EQ(h->describe(), "http 3000 /health 200-299");
  auto one = sup::parse_ready_condition(R"({"readyPort": 80, "readyHttp": "/", "readyHttpStatus": 204, "readyIntervalMs": 10})");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->status_min, 204);
  EXPECT_EQ(one->status_max, 204);
  EXPECT_EQ(one->interval_ms, 10);
  auto range = sup::parse_ready_condition(R"({"readyPort": 80, "readyHttp": "/", "readyHttpStatus": {"min": 200, "max": 204}})");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->status_max, 204);
  auto err = sup::parse_ready_condition(R"({"readyLog": "x", "readyLogStream": "stderr"})");
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->stream, sup::ReadyCondition::Stream::err);
  // readyFd: in a request only.
  auto fd = sup::ready_condition_from_json(nlohmann::json{{"readyFd", 3}});
  ASSERT_TRUE(fd.ok() && fd.value());
  EXPECT_EQ(fd.value()->kind, sup::ReadyCondition::Kind::notify);
  EXPECT_EQ(fd.value()->describe(), "fd 3");
  for (const char* bad : {R"({"readyFd": 3})", R"({"readyLog": "x", "readyLogStream": "both2"})",
                          R"({"readyPort": 80, "readyIntervalMs": 9})", R"({"readyLog": "x", "readyIntervalMs": 50})",
                          R"({"readyPort": 80, "readyHttp": "/", "readyHttpStatus": {"min": 300, "max": 200}})",
                          R"({"readyPort": 80, "readyHttpStatus": 200})", "http 80 / 99", "http 80 / 200-x"}) {
    auto r = sup::parse_ready_condition(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, sup::Errc::invalid_argument) << bad;
    }
  }
  EXPECT_FALSE(sup::ready_condition_from_json(nlohmann::json{{"readyFd", 2}}).ok());
}

TEST_F(ReadyTest, ReadyAtIsTheTimeOfTheMatchingOutputAndStaysAfterReopen) {
  ASSERT_EQ(start_ready("echo booting; sleep 0.3; echo listening; sleep 30", cond("log ^listening$"), "srv"), "srv");
  sup::LogIndex index;
  ASSERT_EQ(index.open(record_dir("srv")), 0);
  std::string line_at;
  for (std::uint64_t i = 0; i < index.end(); ++i) {
    const sup::LogChunk* c = index.chunk(i);
    if (!c) continue;
    std::string bytes;
    const sup::LogSelection sel = c->stream == sup::LogStream::err ? sup::LogSelection::err : sup::LogSelection::out;
    ASSERT_EQ(index.read(sel, index.position(i, sel), c->length, &bytes), 0);
    if (bytes.find("listening") != std::string::npos) line_at = sup::iso_of_us(c->time_us);
  }

  auto s = sup_->status("srv");
  EXPECT_EQ(s->ready_at, line_at);
  ASSERT_TRUE(s->ready_match);
  EXPECT_EQ(s->ready_match->text, "listening");
  EXPECT_EQ(s->ready_match->stream, "stdout");
  reopen();
  s = sup_->status("srv");
  EXPECT_EQ(s->ready_at, line_at);
  ASSERT_TRUE(s->ready_match);
  EXPECT_EQ(s->ready_match->match, "listening");
}

TEST_F(ReadyTest, OnceReadyItStaysReadyWhenANewConditionIsSet) {
  const std::string id = start_ready("echo up; sleep 30", cond("log ^up$"));
  ASSERT_FALSE(id.empty());
  const std::string at = sup_->status(id)->ready_at;
  SBX_EXPECT_OK(sup_->set_ready(id, cond("log NEVER")));
  auto s = sup_->status(id);
  EXPECT_TRUE(s->ready);
  EXPECT_EQ(s->ready_at, at);
  EXPECT_EQ(s->ready_when, "log ^up$");
}

TEST_F(ReadyTest, ReadyFdIsTheCommandsOwnWord) {
  auto c = sup::ready_condition_from_json(nlohmann::json{{"readyFd", 3}});
  ASSERT_TRUE(c.ok() && c.value());
  const std::string id = start_ready("echo starting; sleep 0.2; echo >&3; echo >&3; echo still-alive; sleep 30", *c.value());
  ASSERT_FALSE(id.empty());
  auto s = sup_->status(id);
  ASSERT_TRUE(s->ready_match);
  EXPECT_EQ(s->ready_match->kind, sup::ReadyCondition::Kind::notify);
  EXPECT_EQ(s->ready_when, "fd 3");
  // A second newline costs the command nothing (no SIGPIPE).
  EXPECT_TRUE(wait_for_text(s->log_file, "still-alive"));
  EXPECT_TRUE(sup_->status(id)->running);
}

TEST_F(ReadyTest, APromptWithoutNewlineIsReadyWhileItRuns) {
  const std::string id = start_ready("printf 'partial-ready'; sleep 30", cond("log partial-ready"));
  ASSERT_FALSE(id.empty());
  EXPECT_TRUE(sup_->status(id)->running);
}

TEST_F(ReadyTest, ReadersOfTheCommandsWordAndOfALogLineAreEachAnsweredWhenItComes) {
  // Each reader's probe hears of the command's output: the one of a notify
  // condition looks for the word, the one of a log condition for its line.
  const std::string gate = state_dir() + "/gate";
  auto fd3 = sup::ready_condition_from_json(nlohmann::json{{"readyFd", 3}});
  ASSERT_TRUE(fd3.ok() && fd3.value());
  auto spec = shell("echo waiting; while [ ! -e '" + gate + "' ]; do sleep 0.02; done; echo >&3; echo serving; sleep 30");
  spec.ready = *fd3.value();
  auto st = sup_->start(spec);
  ASSERT_TRUE(st.ok());
  const std::string id = st->bg_id;
  std::atomic<int> word{0}, waiting{0}, line{0};
  auto a = sup_->probe_for_reader(id, *fd3.value(), [&](const sup::ReadyMatch& m) {
    if (m.kind == sup::ReadyCondition::Kind::notify) ++word;
  });
  // Probes start in order: once this one is answered, the first one is probing.
  auto w = sup_->probe_for_reader(id, cond("log ^waiting$"), [&](const sup::ReadyMatch&) { ++waiting; });
  auto b = sup_->probe_for_reader(id, cond("log ^serving$"), [&](const sup::ReadyMatch& m) {
    if (m.text == "serving") ++line;
  });
  ASSERT_TRUE(a.ok() && w.ok() && b.ok());
  ASSERT_TRUE(wait_until([&] { return waiting.load() == 1; }, 10000ms, 10ms));
  EXPECT_EQ(word.load() + line.load(), 0);
  write_file(gate, "");
  EXPECT_TRUE(wait_until([&] { return word.load() == 1 && line.load() == 1; }, 10000ms, 10ms));
  for (auto t : {*a, *w, *b}) sup_->cancel_probe(t);
}

}  // namespace
}  // namespace sbxtest
