// The one-line JSON writer of the root list: what it writes parses back to
// the same values, whatever bytes the strings hold.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fsd/json_object_writer.hpp"

namespace {

TEST(JsonObjectWriter, WritesWhatParsesBack) {
  std::string out;
  fsd::JsonObjectWriter w(out);
  const std::string odd = std::string("q\"b\\s/\n\t\r\b\f\x01\x1f ") + "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
  w.str("s", odd).str_or_null("e", "").str_or_null("f", "x").num("i", std::int64_t{-42}).num("d", 12.5)
      .num("z", 0.0).num_or_null("n", std::nullopt).num_or_null("m", 7).boolean("t", true).boolean("f2", false);
  w.close();
  EXPECT_EQ(out.find('\n'), std::string::npos) << "one line";
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["s"], odd);
  EXPECT_TRUE(j["e"].is_null());
  EXPECT_EQ(j["f"], "x");
  EXPECT_EQ(j["i"], -42);
  EXPECT_EQ(j["d"], 12.5);
  EXPECT_EQ(j["z"], 0);
  EXPECT_TRUE(j["n"].is_null());
  EXPECT_EQ(j["m"], 7);
  EXPECT_EQ(j["t"], true);
  EXPECT_EQ(j["f2"], false);
}

TEST(JsonObjectWriter, BytesThatAreNotUtf8BecomeTheReplacementCharacter) {
  std::string out;
  fsd::JsonObjectWriter w(out);
  w.str("s", "a\xff" "b\xc3").num("nan", 0.0 / 0.0);
  w.close();
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["s"], "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
  EXPECT_TRUE(j["nan"].is_null());
}

TEST(JsonObjectWriter, HexEscapedQuotingNamesEachByteThatIsNotUtf8) {
  std::string out;
  const std::string text = "ok \xC3\xA9 \"q\" \\ \t\x01 bad \xFF\xFE end\xC3";
  EXPECT_EQ(fsd::JsonObjectWriter::quote_hex_escaped(out, text), 3u);
  EXPECT_EQ(nlohmann::json::parse(out), "ok \xC3\xA9 \"q\" \\ \t\x01 bad \\xFF\\xFE end\\xC3");
  // A long run of plain bytes comes through whole.
  std::string big(1 << 20, 'a');
  out.clear();
  EXPECT_EQ(fsd::JsonObjectWriter::quote_hex_escaped(out, big), 0u);
  EXPECT_EQ(out.size(), big.size() + 2);
}

TEST(JsonObjectWriter, AnEmptyObject) {
  std::string out;
  fsd::JsonObjectWriter(out).close();
  EXPECT_EQ(out, "{}");
}

}  // namespace
