// Which bytes are text: the check behind refusing binary requests.
#include <string>

#include <gtest/gtest.h>

#include "supervisor/ready_condition.hpp"
#include "supervisor/spec.hpp"
#include "supervisor/utf8.hpp"

namespace {

TEST(Utf8Test, CharacterLengths) {
  EXPECT_EQ(sup::utf8_char_len("a", 0), 1u);
  EXPECT_EQ(sup::utf8_char_len("\xc3\xa9", 0), 2u);          // é
  EXPECT_EQ(sup::utf8_char_len("\xe2\x82\xac", 0), 3u);      // €
  EXPECT_EQ(sup::utf8_char_len("\xf0\x9f\x98\x80", 0), 4u);  // an emoji
  EXPECT_EQ(sup::utf8_char_len("\x80", 0), 0u);              // a stray continuation byte
  EXPECT_EQ(sup::utf8_char_len("\xc0\xaf", 0), 0u);          // overlong '/'
  EXPECT_EQ(sup::utf8_char_len("\xed\xa0\x80", 0), 0u);      // a UTF-16 surrogate
  EXPECT_EQ(sup::utf8_char_len("\xf4\x90\x80\x80", 0), 0u);  // past U+10FFFF
  EXPECT_EQ(sup::utf8_char_len("\xe2\x82", 0), 0u);          // cut short
}

TEST(Utf8Test, WhyNotText) {
  EXPECT_FALSE(sup::why_not_text("echo caf\xc3\xa9\n"));
  EXPECT_EQ(sup::why_not_text(std::string("ab\0c", 4)), "a NUL byte at offset 2");
  EXPECT_EQ(sup::why_not_text("ab\xff"), "byte 0xff at offset 2 is not UTF-8");
}

TEST(Utf8Test, NeverTextAllowsACharacterCutByTheEndOfAWrite) {
  EXPECT_FALSE(sup::never_text("echo caf\xc3"));  // the rest may come in the next write
  EXPECT_FALSE(sup::never_text("echo \xf0\x9f\x98"));
  EXPECT_TRUE(sup::never_text("echo \xff and more"));
  EXPECT_TRUE(sup::never_text(std::string("a\0", 2)));
}

TEST(Utf8Test, ParsersRefuseWhatIsNotText) {
  auto text = sup::parse_request("echo \xfe\n", "/");
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error().code, sup::Errc::invalid_argument);
  EXPECT_NE(text.error().message.find("not UTF-8"), std::string::npos) << text.error().message;
  auto cond = sup::parse_ready_condition("log a\xff");
  ASSERT_FALSE(cond);
  EXPECT_EQ(cond.error().code, sup::Errc::invalid_argument);
  auto big = sup::parse_ready_condition("log " + std::string(sup::kMaxConditionBytes, 'x'));
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, sup::Errc::too_big);
  auto name = sup::validate_name(std::string(65, 'n'));
  ASSERT_FALSE(name);
  EXPECT_EQ(name.error().code, sup::Errc::name_too_long);
}

}  // namespace
