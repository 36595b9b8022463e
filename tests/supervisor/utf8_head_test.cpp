// sup::utf8_head, the one cutter of text by bytes and by characters (the
// box's steps, a step's name, SBX_CLIENT, `errors`' reasons).
#include <gtest/gtest.h>

#include "supervisor/box_steps.hpp"
#include "supervisor/utf8.hpp"

namespace {

constexpr std::string_view kE = "\xc3\xa9";        // é, 2 bytes
constexpr std::string_view kEuro = "\xe2\x82\xac";  // €, 3 bytes

TEST(Utf8Head, ByBytesNeverInsideACharacter) {
  const std::string s = "a" + std::string(kEuro) + "b";  // a € b: 5 bytes
  EXPECT_EQ(sup::utf8_head(s, 0), "");
  EXPECT_EQ(sup::utf8_head(s, 1), "a");
  EXPECT_EQ(sup::utf8_head(s, 2), "a");
  EXPECT_EQ(sup::utf8_head(s, 3), "a");
  EXPECT_EQ(sup::utf8_head(s, 4), "a" + std::string(kEuro));
  EXPECT_EQ(sup::utf8_head(s, 5), s);
  EXPECT_EQ(sup::utf8_head(s, 99), s);
  EXPECT_EQ(sup::utf8_head("", 3), "");
}

TEST(Utf8Head, ByCharactersAndBoth) {
  const std::string s = std::string(kE) + "x" + std::string(kEuro) + "y";  // 4 characters, 7 bytes
  EXPECT_EQ(sup::utf8_head(s, s.size(), 0), "");
  EXPECT_EQ(sup::utf8_head(s, s.size(), 1), kE);
  EXPECT_EQ(sup::utf8_head(s, s.size(), 3), std::string(kE) + "x" + std::string(kEuro));
  EXPECT_EQ(sup::utf8_head(s, s.size(), 4), s);
  EXPECT_EQ(sup::utf8_head(s, 4, 3), std::string(kE) + "x");  // the bytes run out first
  EXPECT_EQ(sup::utf8_head(s, 7, 2), std::string(kE) + "x");  // the characters do
}

TEST(Utf8Head, BytesThatAreNotUtf8AreCutToo) {
  EXPECT_EQ(sup::utf8_head("\xff\xfe\xfd", 2), "\xff\xfe");
  EXPECT_EQ(sup::utf8_head("\x80\x80\x80z", 2), "");  // stray continuation bytes start no character
}

TEST(Utf8Head, TheBoxStepsCutEndsInAnEllipsis) {
  EXPECT_EQ(sup::BoxSteps::cut("abc", 3), "abc");
  EXPECT_EQ(sup::BoxSteps::cut("abcd", 3), "ab\u2026");
  const std::string e3 = std::string(kE) + std::string(kE) + std::string(kE);
  EXPECT_EQ(sup::BoxSteps::cut(e3, 3), e3);
  EXPECT_EQ(sup::BoxSteps::cut(e3 + "z", 3), std::string(kE) + std::string(kE) + "\u2026");
  // A byte that starts no character is one, as JSON shows it.
  EXPECT_EQ(sup::BoxSteps::cut("\x80\x80\x80", 3), "\x80\x80\x80");
  EXPECT_EQ(sup::BoxSteps::cut(std::string(1, '\0') + std::string(5000, '\x80'), 200),
            std::string(1, '\0') + std::string(198, '\x80') + "\u2026");
}

TEST(Utf8Tail, ACutFromTheEndStartsAtACharacter) {
  const std::string e = "\xc3\xa9";      // é, 2 bytes
  const std::string euro = "\xe2\x82\xac";  // €, 3 bytes
  EXPECT_EQ(sup::utf8_tail("abc", 5), "abc");
  EXPECT_EQ(sup::utf8_tail("abc", 2), "bc");
  EXPECT_EQ(sup::utf8_tail("a" + e, 1), "");       // half of é: left out
  EXPECT_EQ(sup::utf8_tail("a" + e, 2), e);
  EXPECT_EQ(sup::utf8_tail(euro + euro, 4), euro);  // one byte of the first € dropped, then two more
  EXPECT_EQ(sup::utf8_tail("y\x80\x80\x80\x80z", 5), "\x80z");  // at most 3 are skipped
}

}  // namespace
