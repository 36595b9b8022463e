// Masking: "****" in shown text, byte-for-byte '*' in log streams.
#include <gtest/gtest.h>

#include "supervisor/secrets.hpp"

namespace {

TEST(MaskSecrets, ReplacesEveryOccurrenceLongestFirst) {
  EXPECT_EQ(sup::mask_secrets("token=abc123 again abc123", {"abc123"}), "token=**** again ****");
  EXPECT_EQ(sup::mask_secrets("xabcdefx", {"abc", "abcdef"}), "x****x");
  EXPECT_EQ(sup::mask_secrets("nothing here", {"", "zzz"}), "nothing here");
  // Two that overlap: every byte of both.
  EXPECT_EQ(sup::mask_secrets("echo xyzOVERLAPqrs!", {"xyzOVERLAP", "OVERLAPqrs"}), "echo ****!");
  EXPECT_EQ(sup::mask_secrets("abcde", {"abc", "cde"}), "****");
}

// A request as written: JSON may spell a secret with escapes (Python's
// json.dumps writes \u00e9 for é; \/ is a slash); each string holding one is
// written anew, masked, and the rest of the text stays as it was.
TEST(MaskSecretsInJson, FindsASecretHoweverItsEscapesSpellIt) {
  const std::vector<std::string> secrets = {"h\u00e9llo-secret", "tok/en"};
  EXPECT_EQ(sup::mask_secrets_in_json(R"({"cmd": "true",  "secretEnv": {"X": "h\u00e9llo-secret"}, "bogus": 1})",
                                      secrets),
            R"({"cmd": "true",  "secretEnv": {"X": "****"}, "bogus": 1})");
  EXPECT_EQ(sup::mask_secrets_in_json(R"({"env":{"T":"a tok\/en b"},"k\u0065y":"tok\u002fen"})", secrets),
            R"({"env":{"T":"a **** b"},"k\u0065y":"****"})");
  // A quote or a backslash escaped inside a string ends nothing.
  EXPECT_EQ(sup::mask_secrets_in_json(R"({"a":"x\"tok\/en\\","b":"\\"})", secrets), R"({"a":"x\"****\\","b":"\\"})");
  // Not JSON: each secret as it stands.
  EXPECT_EQ(sup::mask_secrets_in_json("echo tok/en h\\u00e9llo-secret {", secrets), "echo **** h\\u00e9llo-secret {");
  EXPECT_EQ(sup::mask_secrets_in_json(R"({"a":"tok\/en"})", {}), R"({"a":"tok\/en"})");
}

TEST(RequestSecrets, TheSecretEnvValuesAndHowTheRequestSpellsThem) {
  EXPECT_EQ(sup::request_secrets(R"({"cmd": "x", "secretEnv": {"A": "plain", "B": "q\"uote", "C": "", "D": 5}})"),
            (std::vector<std::string>{"plain", "q\"uote", "q\\\"uote"}));
  EXPECT_TRUE(sup::request_secrets(R"({"cmd": "x", "secretEnv": {"A": "cut)").empty()) << "not JSON: none";
  EXPECT_TRUE(sup::request_secrets("echo plain").empty());
  // Every value the text gives, not only those the parsed object keeps.
  EXPECT_EQ(sup::request_secrets(R"({"cmd": "x", "secretEnv": {"K": "first", "K": "second"}})"),
            (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(sup::request_secrets(R"({"secretEnv": {"K": "one"}, "secretEnv": {"K": "two"}, "env": {"E": "no"}})"),
            (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(sup::request_secrets(R"({"secretEnv": ["a"]})"), std::vector<std::string>{"a"});
  EXPECT_EQ(sup::request_secrets(R"({"secretEnv": {"K": "given"}, "cmd": )"), std::vector<std::string>{"given"})
      << "said before the text stopped parsing";
  EXPECT_TRUE(sup::request_secrets(R"({"env": {"secretEnv": "nested, not the request's"}})").empty());
}

TEST(SecretStartAtEnd, BlindHoldsTheUnfinishedLineWhateverItIs) {
  // A global secret's reach: the same whether the end begins it or not.
  const std::vector<std::string> secrets = {"gl0bal-s3cr3t"};
  EXPECT_EQ(sup::secret_start_at_end("done\nabc gl0", secrets, 12), 7u);
  EXPECT_EQ(sup::secret_start_at_end("done\nabc xyz", secrets, 12), 7u);
  EXPECT_EQ(sup::secret_start_at_end("a long unfinished line", secrets, 12), 12u);
  EXPECT_EQ(sup::secret_start_at_end("done\n", secrets, 12), 0u) << "a finished line waits for nothing";
  EXPECT_EQ(sup::secret_start_at_end("x gl0bal-s3cr3t", secrets, 12), 0u) << "whole: masked, not held";
  EXPECT_EQ(sup::secret_start_at_end("gl0bal-s3cr3t ab", secrets, 12), 3u);
  // A command's own secret past the blind reach is still found.
  EXPECT_EQ(sup::secret_start_at_end("\nownsecretvalu", {"ownsecretvalue", "g"}, 0), 13u);
  EXPECT_EQ(sup::secret_start_at_end("\nx ownsecretvalu", {"ownsecretvalue", "gl0b"}, 3), 13u);
}

TEST(SecretPartAtCut, BlindMasksTheLineAtTheCutWhateverItIs) {
  const std::vector<std::string> secrets = {"gl0bal-s3cr3t"};
  for (const char* text : {"bal-s3cr3t rest\nnext", "xyzxyzxyz rest\nnext"}) {
    EXPECT_EQ(sup::secret_part_at_cut(text, secrets, 12, true), 12u) << text;
    EXPECT_EQ(sup::secret_part_at_cut(text, secrets, 12, false), 4u) << text;
  }
  EXPECT_EQ(sup::secret_part_at_cut("ab\ncd", secrets, 12, true), 2u);
  EXPECT_EQ(sup::secret_part_at_cut("\nabc", secrets, 12, true), 0u);
  // Without a blind reach, only what ends or begins a secret.
  EXPECT_EQ(sup::secret_part_at_cut("3cr3t rest", secrets, 0, true), 5u);
  EXPECT_EQ(sup::secret_part_at_cut("rest gl0b", secrets, 0, false), 4u);
  EXPECT_EQ(sup::secret_part_at_cut("rest here", secrets, 0, false), 0u);
}

TEST(SecretStartAtEnd, TheLongestEndThatBeginsASecret) {
  const std::vector<std::string> secrets = {"alphaTokenValue", "abab"};
  EXPECT_EQ(sup::secret_start_at_end("pre alphaTok", secrets), 8u);
  EXPECT_EQ(sup::secret_start_at_end("pre alphaTokenValue", secrets), 0u) << "whole: masked, not held";
  EXPECT_EQ(sup::secret_start_at_end("xaba", secrets), 3u);
  // The end of a whole secret that repeats its beginning: masked, not held.
  EXPECT_EQ(sup::secret_start_at_end("xabab", secrets), 0u);
  EXPECT_EQ(sup::secret_start_at_end("tok=s3cr3ts", {"s3cr3ts"}), 0u);
  EXPECT_EQ(sup::secret_start_at_end("tok=s3cr3ts s3", {"s3cr3ts"}), 2u);
  EXPECT_EQ(sup::secret_start_at_end("nothing", secrets), 0u);
  EXPECT_EQ(sup::secret_start_at_end("a", {""}), 0u);
  EXPECT_EQ(sup::secret_start_at_end("", secrets), 0u);
}

TEST(MaskSecretsInPlace, KeepsTheSizeAndCoversOverlaps) {
  std::string s = "pre-abcde-post";
  sup::mask_secrets_in_place(s, {"abc", "cde"});
  EXPECT_EQ(s, "pre-*****-post");
  std::string t = "aaaa";
  sup::mask_secrets_in_place(t, {"aa"});
  EXPECT_EQ(t, "****");
}

// What a reader does: mask a window widened by (longest - 1) on each side
// and keep the middle. The result never depends on where the window starts.
TEST(MaskSecretsInPlace, AnyWindowAgreesWithTheWhole) {
  const std::vector<std::string> secrets = {"s3cr3t-value", "t-v"};
  const std::string text = "a s3cr3t-value b s3cr3t-values3cr3t-value c t-v";
  std::string whole = text;
  sup::mask_secrets_in_place(whole, secrets);
  ASSERT_EQ(whole.find("s3cr3t"), std::string::npos);
  const size_t reach = 11;
  for (size_t off = 0; off < text.size(); ++off) {
    for (size_t len = 1; off + len <= text.size(); ++len) {
      size_t lo = off >= reach ? off - reach : 0;
      size_t hi = std::min(text.size(), off + len + reach);
      std::string win = text.substr(lo, hi - lo);
      sup::mask_secrets_in_place(win, secrets);
      ASSERT_EQ(win.substr(off - lo, len), whole.substr(off, len)) << off << "+" << len;
    }
  }
}

}  // namespace
