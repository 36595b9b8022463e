// LogWatchFilter (supervisor/log_watch_filter.hpp): the lines it lets
// through include every line any of its patterns matches, checked against
// RE2 itself over many patterns and lines; and it does filter.
#include "supervisor/log_watch_filter.hpp"

#include <re2/re2.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using sup::LogWatchFilter;

// Alternations, case folding, anchors, classes, optional parts, repeats,
// Unicode (the Kelvin sign and long s fold to ASCII k and s), and patterns
// with no literal at all.
const std::vector<std::string> kPatterns = {
    "marker-12", "^marker-1$", "foo|bar", "(?i)ready", "(?i)KELVIN", "kelvin", "[Ee]rror: \\d+",
    "listening on (port )?\\d+", "a.c", "x{3,}", "^$", "\\d+", ".", "(?s)foo.bar", "\\Aready\\z", "[^a]bc",
    "(abc)?def", "colou?r", "\\bword\\b", "ab|cd|ef", "[a-c]{2}zz", "é", "É", "(?i)é", "café", "(?i)straße",
    "ready\\.$", "\\x{212A}elvin", "(?i)s", "ſ", "(?U)a+b", "(?i)[k]ey", "server (started|ready)",
    "[[:upper:]]{3}", "\\pL+ok", "(?i)^ok$", "(?i:sTaRt)ed", "^(?:GET|POST) /", "[0-9]{4}-[0-9]{2}",
    "(?i)(up|running) on :\\d+", "q+uit", "\\QA.B\\E", "(foo)+bar", "[Kk]ey=\\w+", "(?i)\\bk",
    "zz$", "^\\s*done", "(?i)[^x]ame", "c[aeiou]t|d[aeiou]g", "ok(ay)?!",
};

const std::vector<std::string> kPieces = {
    "marker-12", "MARKER-12", "marker-1", "ready", "READY", "Ready.", "\u212Aelvin", "kelvin", "KELVIN", "error: 42",
    "Error: 7", "listening on port 80", "listening on 9", "café", "CAFÉ", "straße", "STRASSE", "ſtraße", "foo",
    "bar", "FOO bar", "x", "xxx", "abc", "def", "colour", "color", "word", "é", "É", "ok", "OK", "okay!", "key",
    "KEY", "\u212Aey", "ſ", " ", "", "zz", "bczz", "GET /x", "POST /", "2026-12", "up on :80", "RUNNING ON :1",
    "quit", "qqquit", "A.B", "AxB", "foofoobar", "Key=v", "server started", "server ready", "ABC", "abcok",
    "\tdone", "came", "xame", "cat", "DOG", "dig", "STARTed", "started", "sTaRted", "\xff\xfe", "s",
};

/// Whether the filter of `atoms` lets `line` (one of the lines of `region`) through.
std::set<std::string_view> passed(const LogWatchFilter& f, std::string_view region) {
  std::set<std::string_view> lines;
  std::string_view line;
  for (std::size_t from = 0; f.next(region, &from, &line);) lines.insert(line);
  return lines;
}

std::vector<std::string> random_lines(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < n; ++i) {
    std::string line;
    const int parts = static_cast<int>(rng() % 5);
    for (int p = 0; p < parts; ++p) {
      if (p && rng() % 2) line += ' ';
      // Padding in front moves the literals across the 16-byte blocks.
      if (rng() % 3 == 0) line += std::string(rng() % 20, 'x');
      line += kPieces[rng() % kPieces.size()];
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

TEST(LogWatchFilterTest, EveryLineAPatternMatchesPassesItsFilter) {
  const std::vector<std::string> lines = random_lines(3000, 15);
  std::size_t filtered_patterns = 0, matches = 0, dropped = 0;
  for (const std::string& pattern : kPatterns) {
    RE2 re(pattern);
    ASSERT_TRUE(re.ok()) << pattern;
    const auto atoms = LogWatchFilter::atoms_of(pattern);
    if (!atoms) continue;  // searched on every line: nothing to check
    ++filtered_patterns;
    const LogWatchFilter f(*atoms);
    for (const std::string& line : lines) {
      const bool lets = !passed(f, line).empty();
      if (RE2::PartialMatch(line, re)) {
        ++matches;
        EXPECT_TRUE(lets) << "pattern " << pattern << " matches \"" << line << "\", its filter drops it";
      } else if (!lets) {
        ++dropped;
      }
    }
  }
  // The check has teeth: most patterns have literals, lines match them and others are dropped.
  EXPECT_GT(filtered_patterns, kPatterns.size() / 2);
  EXPECT_GT(matches, 1000u);
  EXPECT_GT(dropped, 10000u);
}

TEST(LogWatchFilterTest, OneFilterForAllPatternsFindsEachMatchingLineOfARegion) {
  // All patterns with literals in one filter (more rare bytes than one SIMD pass takes), over
  // one region of many lines: the lines it gives are whole lines, in order, and include
  // every line a pattern matches.
  std::vector<std::string> atoms;
  std::vector<std::unique_ptr<RE2>> res;
  for (const std::string& pattern : kPatterns)
    if (const auto a = LogWatchFilter::atoms_of(pattern)) {
      atoms.insert(atoms.end(), a->begin(), a->end());
      res.push_back(std::make_unique<RE2>(pattern));
    }
  const std::vector<std::string> lines = random_lines(2000, 16);
  std::string region;
  for (const std::string& line : lines) region += line + "\n";
  region.pop_back();
  const LogWatchFilter f(atoms);
  std::vector<std::string_view> got;
  std::string_view line;
  for (std::size_t from = 0; f.next(region, &from, &line);) got.push_back(line);
  std::size_t at = 0, want = 0;
  for (const std::string& l : lines) {
    bool matches = false;
    for (const auto& re : res) matches = matches || RE2::PartialMatch(l, *re);
    if (!matches) continue;
    ++want;
    while (at < got.size() && got[at] != l) ++at;
    EXPECT_LT(at, got.size()) << "dropped: \"" << l << "\"";
    if (at < got.size()) ++at;
  }
  EXPECT_GT(want, 500u);
  EXPECT_LT(got.size(), lines.size());
  for (std::string_view g : got) EXPECT_EQ(g.find('\n'), std::string_view::npos);
}

TEST(LogWatchFilterTest, PatternsWithoutLiteralsAreSearchedOnEveryLine) {
  for (const char* p : {"^$", "\\d+", ".", "a", "ab|c", "[a-z]+", "x?", "(?i)k", "[^a]", "(", "a{2}b?"})
    EXPECT_FALSE(LogWatchFilter::atoms_of(p)) << p;
  for (const char* p : {"^marker-1$", "foo|bar", "(?i)ready", "listening on (port )?\\d+", "\\Aready\\z"})
    EXPECT_TRUE(LogWatchFilter::atoms_of(p)) << p;
}

TEST(LogWatchFilterTest, LinesWithoutALiteralAreDroppedAndNonAsciiLinesPass) {
  const LogWatchFilter f(*LogWatchFilter::atoms_of("^marker-1[0-9]$"));
  std::string region;
  for (int i = 0; i < 1000; ++i) region += std::string(99, 'x') + "\n";
  region += "tail marker-1 end\nMARKER-15\nx\u212Ay\nlast";
  const std::set<std::string_view> got = passed(f, region);
  EXPECT_EQ(got, (std::set<std::string_view>{"tail marker-1 end", "MARKER-15", "x\u212Ay"}));
  // A literal at the very start and end of the region, shorter than a 16-byte block.
  EXPECT_EQ(passed(f, "marker-1"), (std::set<std::string_view>{"marker-1"}));
  EXPECT_EQ(passed(f, "a\nmarker-1"), (std::set<std::string_view>{"marker-1"}));
  EXPECT_TRUE(passed(f, "arker-1\nmarker").empty());
}

}  // namespace
