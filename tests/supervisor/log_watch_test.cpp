// LogWatch (supervisor/log_watch.hpp): many log conditions of one command
// matched in one pass over an index and log written as the monitor does.
#include "supervisor/log_watch.hpp"

#include <re2/re2.h>

#include <random>

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
  /// Many chunks at once, appended as the monitor does (the bytes, then their entries).
  void append(const std::vector<std::pair<std::string, std::int64_t>>& chunks) {
    if (log_.empty()) write_file(tmp_ / "index", index_);  // its header
    std::string bytes, entries;
    for (const auto& [b, us] : chunks) {
      entries += sup::encode_index_entry(
          LogChunk{log_.size() + bytes.size(), us, static_cast<std::uint32_t>(b.size()), LogStream::out});
      bytes += b;
    }
    std::ofstream(tmp_ / "log", std::ios::binary | std::ios::app) << bytes;
    std::ofstream(tmp_ / "index", std::ios::binary | std::ios::app) << entries;
    log_ += bytes;
    index_ += entries;
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

TEST_F(LogWatchTest, AMatchedLineShowsNoPartOfASecret) {
  LogWatch w(tmp_.path(), {"hunter2"});
  std::optional<ReadyMatch> edge, inside, cut;
  w.add(cond("log =.{6}"), to(&edge));  // ends inside the secret
  w.add(cond("log unter"), to(&inside));  // all inside it
  w.add(cond("log end$"), to(&cut));  // a line cut inside a secret
  chunk(LogStream::out, "key=hunter2 ok\n" + std::string(sup::kMaxMatchText - 3, 'A') + "hunter2 end\n", 1);
  w.output();
  ASSERT_TRUE(edge && inside && cut);
  EXPECT_EQ(edge->text, "key=******* ok");
  EXPECT_EQ(edge->match, "=******");
  EXPECT_EQ(inside->match, "*****");
  EXPECT_EQ(cut->text, std::string(sup::kMaxMatchText - 3, 'A') + "***");
  EXPECT_EQ(cut->match, "end");
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

TEST_F(LogWatchTest, ManyConditionsEachGetTheFirstLineALineByLineSearchFinds) {
  // Patterns with literals and without, case-folded, alternations, anchors and
  // classes; output cut into chunks at odd places, read a few chunks at a time,
  // conditions added on the way: each one matches the first line RE2 matches alone.
  std::vector<std::string> patterns;
  for (int i = 0; i < 120; ++i) patterns.push_back("^marker-" + std::to_string(i) + "$");
  for (const char* p : {"(?i)server READY", "listening on (port )?\\d+", "^$", "\\d{3}", "err(or)?: x", "\\Aonly\\z",
                        "(?i)é", "^[A-Z]+$", "done|finished", "ab+c", "(?i)^KEY=", "\\bk\\w+", "NEVER-SEEN"})
    patterns.push_back(p);
  std::mt19937 rng(15);
  std::vector<std::string> lines;
  const std::vector<std::string> others = {"Server Ready now", "listening on 8080", "", "code 404", "err: x",
                                           "only", "ONLY", "CAFÉ", "finished", "abbbc", "key=1", "a kilo",
                                           "marker-7 ", "xmarker-8", "MARKER-9"};
  for (int i = 0; i < 6000; ++i) {
    const unsigned r = rng() % 100;
    if (r < 3) lines.push_back("marker-" + std::to_string(rng() % 130));
    else if (r < 8) lines.push_back(others[rng() % others.size()]);
    else lines.push_back(std::string(rng() % 120, 'x'));
  }
  std::string out;
  std::vector<std::size_t> line_end;  // where each line's newline is
  for (const std::string& l : lines) {
    out += l;
    line_end.push_back(out.size());
    out += '\n';
  }
  std::vector<std::size_t> chunk_end;  // one past each chunk's last byte
  for (std::size_t at = 0; at < out.size();) {
    at = std::min(out.size(), at + 1 + rng() % (rng() % 4 == 0 ? 40000 : 300));
    chunk_end.push_back(at);
  }

  LogWatch w(tmp_.path());
  std::vector<std::optional<ReadyMatch>> got(patterns.size());
  const std::size_t late = patterns.size() / 2;  // the others join half way
  bool added = false;
  for (std::size_t i = 0; i < late; ++i) w.add(cond("log " + patterns[i]), to(&got[i]));
  for (std::size_t c = 0, from = 0; c < chunk_end.size();) {
    std::vector<std::pair<std::string, std::int64_t>> batch;
    for (std::size_t n = 1 + rng() % 30; n > 0 && c < chunk_end.size(); --n, ++c) {
      batch.emplace_back(out.substr(from, chunk_end[c] - from), static_cast<std::int64_t>(c));
      from = chunk_end[c];
    }
    append(batch);
    if (!added && c > chunk_end.size() / 2) {
      for (std::size_t i = late; i < patterns.size(); ++i) w.add(cond("log " + patterns[i]), to(&got[i]));
      added = true;
    }
    w.output();
  }
  std::size_t matched = 0;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    RE2 re(patterns[i]);
    std::optional<std::size_t> first;
    for (std::size_t l = 0; l < lines.size() && !first; ++l)
      if (RE2::PartialMatch(lines[l], re)) first = l;
    SCOPED_TRACE(patterns[i]);
    ASSERT_EQ(got[i].has_value(), first.has_value());
    if (!first) continue;
    ++matched;
    const std::size_t chunk = static_cast<std::size_t>(
        std::upper_bound(chunk_end.begin(), chunk_end.end(), line_end[*first]) - chunk_end.begin());
    EXPECT_EQ(got[i]->text, lines[*first]);
    EXPECT_EQ(got[i]->time_us, static_cast<std::int64_t>(chunk));
    char cursor[48];
    std::snprintf(cursor, sizeof cursor, "0000000000000abc-%zu", chunk);
    EXPECT_EQ(got[i]->cursor, cursor);
  }
  EXPECT_GT(matched, 100u);
  EXPECT_FALSE(got.back());  // NEVER-SEEN
}

TEST_F(LogWatchTest, AChunkWhoseBytesAreNotInTheLogYetIsReadNextTime) {
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> m;
  w.add(cond("log ^ready$"), to(&m));
  chunk(LogStream::out, "boot\n", 1);
  // The entry of the next chunk is there, its bytes only in part.
  index_ += sup::encode_index_entry(LogChunk{log_.size(), 2, 6, LogStream::out});
  write_file(tmp_ / "index", index_);
  write_file(tmp_ / "log", log_ + "rea");
  w.output();
  EXPECT_FALSE(m);
  write_file(tmp_ / "log", log_ + "ready\n");
  w.output();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->time_us, 2);
  EXPECT_EQ(m->cursor, "0000000000000abc-1");
}

TEST_F(LogWatchTest, OutputWhereEveryLineHoldsALiteralIsSearchedAsWell) {
  // Every line has "error ": the filter lets all through, and the set then
  // searches whole chunks for a while; matches are found either way.
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> marker, marker16, done, never;
  w.add(cond("log ^marker-5$"), to(&marker));
  w.add(cond("log ^marker-16$"), to(&marker16));
  w.add(cond("log error \\d+ done"), to(&done));
  w.add(cond("log error x"), to(&never));
  std::string dense;
  while (dense.size() < 8192) dense += "2026-12-01 error 12 in module m\n";
  std::vector<std::pair<std::string, std::int64_t>> chunks;
  for (int i = 0; i < 40; ++i) {
    std::string bytes = dense;
    if (i == 3) bytes += "marker-5\n";
    if (i == 16) bytes = "marker-16\n" + bytes;
    if (i == 35) bytes += "error 7 done\n";
    chunks.emplace_back(bytes, i);
  }
  for (const auto& c : chunks) {
    append({c});
    w.output();
  }
  ASSERT_TRUE(marker && marker16 && done);
  EXPECT_FALSE(never);
  EXPECT_EQ(marker->time_us, 3);
  EXPECT_EQ(marker16->time_us, 16);
  EXPECT_EQ(done->time_us, 35);
  EXPECT_EQ(done->text, "error 7 done");
}

}  // namespace

namespace {

// A quiet command's readers that come and go: each removed condition (its
// compiled pattern and callback) is let go at once, not at the next output.
TEST_F(LogWatchTest, RemovedConditionsAreLetGoWithoutOutput) {
  chunk(LogStream::out, "starting\n", 1);
  LogWatch w(tmp_.path());
  std::optional<ReadyMatch> kept;
  const std::uint64_t stays = w.add(cond("log ^ready$"), to(&kept));
  w.output();
  std::vector<std::weak_ptr<int>> gone;
  for (int i = 0; i < 50; ++i) {
    auto mine = std::make_shared<int>(i);
    gone.push_back(mine);
    const std::uint64_t t = w.add(cond("log ^never" + std::to_string(i) + "$"), [mine](const ReadyMatch&) {});
    if (i % 2) w.output();  // searched once, or not yet
    w.remove(t);
  }
  std::size_t released = 0;
  for (const auto& g : gone) released += g.expired();
  EXPECT_GE(released, 49u) << "at most the one retired since the last compaction is held";
  // The one left still matches.
  chunk(LogStream::out, "ready\n", 2);
  w.output();
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->text, "ready");
  w.remove(stays);
}

}  // namespace
