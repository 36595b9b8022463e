// LogWatch (supervisor/log_watch.hpp): many log conditions of one command
// matched in one pass over an index and log written as the monitor does.
#include "supervisor/log_watch.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::LogChunk;
using sup::LogStream;
using sup::LogWatch;
using sup::ReadyMatch;

class LogWatchTest : public ::testing::Test {
 protected:
  TempDir tmp_{"sbx-logwatch"};
  std::string log_, index_ = sup::encode_index_header(0xabcu);

  void chunk(LogStream s, const std::string& bytes, std::int64_t us) {
    index_ += sup::encode_index_entry(LogChunk{log_.size(), us, static_cast<std::uint32_t>(bytes.size()), s});
    log_ += bytes;
    write_file(tmp_ / "log", log_);
    write_file(tmp_ / "index", index_);
  }
  /// Keeps the match in *m.
  static LogWatch::OnMatch to(std::optional<ReadyMatch>* m) {
    return [m](const ReadyMatch& r) { *m = r; };
  }
  static sup::ReadyCondition cond(const std::string& text) {
    auto c = sup::parse_ready_condition(text);
    EXPECT_TRUE(c.ok()) << text;
    return c.ok() ? c.value() : sup::ReadyCondition{};
  }
  static sup::ReadyCondition on(const std::string& regex, sup::ReadyCondition::Stream s) {
    sup::ReadyCondition c = cond("log " + regex);
    c.stream = s;
    return c;
  }
};

TEST_F(LogWatchTest, EachConditionMatchesItsOwnFirstLineWithTheOutputsTimeAndCursor) {
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> a, b, never;
  w.add(cond("log ^listening on (\\d+)$"), to(&a));
  w.add(cond("log db ready"), to(&b));
  w.add(cond("log NEVER"), to(&never));
  chunk(LogStream::out, "booting\nlisten", 1000);
  w.output();
  EXPECT_FALSE(a || b || never);
  chunk(LogStream::out, "ing on 8080\nx\n", 2000);
  chunk(LogStream::err, "warn: db ready now\n", 3000);
  w.output();
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(never);
  EXPECT_EQ(a->stream, "stdout");
  EXPECT_EQ(a->text, "listening on 8080");
  EXPECT_EQ(a->match, "listening on 8080");
  EXPECT_EQ(a->time_us, 2000);  // the chunk that ended the line
  EXPECT_EQ(a->cursor, "0000000000000abc-1");
  EXPECT_EQ(b->stream, "stderr");
  EXPECT_EQ(b->match, "db ready");
  EXPECT_EQ(b->time_us, 3000);
  EXPECT_EQ(b->cursor, "0000000000000abc-2");
  EXPECT_FALSE(w.empty());  // NEVER still waits
}

TEST_F(LogWatchTest, StreamsHaveTheirOwnLinesAndConditionsTheirStream) {
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> out, err, both;
  w.add(on("^up$", sup::ReadyCondition::Stream::out), to(&out));
  w.add(on("^up$", sup::ReadyCondition::Stream::err), to(&err));
  w.add(on("^up$", sup::ReadyCondition::Stream::both), to(&both));
  // "u" on stdout and "p\n" on stderr are no line "up".
  chunk(LogStream::out, "u", 1);
  chunk(LogStream::err, "p\nup\n", 2);
  w.output();
  ASSERT_TRUE(err && both);
  EXPECT_FALSE(out);
  EXPECT_EQ(err->stream, "stderr");
  EXPECT_EQ(both->stream, "stderr");
  chunk(LogStream::out, "p\n", 3);
  w.output();
  ASSERT_TRUE(out);
  EXPECT_EQ(out->text, "up");
  EXPECT_EQ(out->time_us, 3);
}

TEST_F(LogWatchTest, APromptWithoutNewlineMatchesWhileRunning) {
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> m;
  w.add(cond("log ready>$"), to(&m));
  chunk(LogStream::out, "hello\nready>", 7);
  w.output();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->text, "ready>");
  EXPECT_EQ(m->time_us, 7);
}

TEST_F(LogWatchTest, AConditionAddedLaterSeesTheWholeLog) {
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> first, late;
  w.add(cond("log NEVER"), to(&first));
  chunk(LogStream::out, "early line\n", 5);
  w.output();
  chunk(LogStream::out, "later line\n", 6);
  w.add(cond("log ^early"), to(&late));
  w.output();
  ASSERT_TRUE(late);
  EXPECT_EQ(late->time_us, 5);
  EXPECT_EQ(late->text, "early line");
  // Both go on as one: a line for each after that.
  std::optional<ReadyMatch> third;
  w.add(cond("log ^third$"), to(&third));
  chunk(LogStream::out, "third\n", 9);
  w.output();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->time_us, 9);
  EXPECT_FALSE(first);
}

TEST_F(LogWatchTest, NoMatchAcrossLinesAndRemovedConditionsStayQuiet) {
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> across, removed, anchored;
  w.add(cond("log a[^x]*b"), to(&across));
  const auto token = w.add(cond("log ^gone$"), to(&removed));
  w.add(cond("log \\Aonly$"), to(&anchored));
  w.remove(token);
  chunk(LogStream::out, "a\nb\ngone\nonly\n", 1);
  w.output();
  EXPECT_FALSE(across);
  EXPECT_FALSE(removed);
  ASSERT_TRUE(anchored);  // \A is the start of the line, as line by line
  EXPECT_EQ(anchored->text, "only");
}

TEST_F(LogWatchTest, AtTheEndALastLongLineWithoutNewlineMatches) {
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> m;
  w.add(cond("log END$"), to(&m));
  chunk(LogStream::out, std::string(sup::kMaxPromptBytes + 10, 'x') + "END", 4);
  w.output();
  EXPECT_FALSE(m);  // too long for a prompt while running
  w.finish();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->text.size(), sup::kMaxMatchText);
}

}  // namespace
