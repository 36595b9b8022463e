// Masking: "****" in shown text, byte-for-byte '*' in log streams.
#include <algorithm>
#include <random>

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
  // The parser stops at a NUL byte: what follows one is read too (review:
  // such a refused request was echoed in `errors` with these unmasked).
  const std::string nul(1, '\0');
  const auto has = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  EXPECT_TRUE(has(sup::request_secrets(R"({"cmd":"true"})" + nul + R"({"secretEnv":{"K":"hunter2"}})"), "hunter2"));
  EXPECT_TRUE(has(sup::request_secrets(R"({"cmd":"a)" + nul + R"(b","secretEnv":{"K":"hunter3"}})"), "hunter3"));
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

// Past a few secrets the text is read once through a rolling hash: the
// bytes covered are exactly those a search for each secret finds, for
// secrets of every length (shorter than the window too), sharing starts,
// overlapping and inside one another, at the text's very end.
TEST(CoveredBytes, ManySecretsCoverWhatASearchForEachFinds) {
  std::mt19937 rng(7);
  const auto naive = [](std::string_view text, const std::vector<std::string>& secrets) {
    std::vector<bool> covered(text.size(), false);
    for (const std::string& s : secrets)
      if (!s.empty())
        for (std::size_t at = text.find(s); at != std::string_view::npos; at = text.find(s, at + 1))
          std::fill(covered.begin() + static_cast<long>(at), covered.begin() + static_cast<long>(at + s.size()), true);
    return covered;
  };
  for (int round = 0; round < 120; ++round) {
    const std::string letters = round % 2 ? "ab" : "abc\xc3\xa9";
    const auto random_text = [&](std::size_t n) {
      std::string t;
      for (std::size_t i = 0; i < n; ++i) t += letters[rng() % letters.size()];
      return t;
    };
    // Short texts are searched for each secret, long ones (4 KiB on) read once.
    const std::string text = random_text(round % 4 ? 4096 + rng() % 2000 : rng() % 400);
    std::vector<std::string> secrets;
    const std::size_t count = 1 + rng() % 40;
    for (std::size_t i = 0; i < count; ++i) {
      if (rng() % 3 == 0 && text.size() > 2) {  // one that occurs
        const std::size_t at = rng() % (text.size() - 1), n = 1 + rng() % std::min<std::size_t>(40, text.size() - at);
        secrets.push_back(text.substr(at, n));
      } else {
        secrets.push_back(random_text(rng() % 12));
      }
    }
    std::vector<bool> got = sup::covered_bytes(text, secrets), want = naive(text, secrets);
    if (got.empty()) got.assign(text.size(), false);
    ASSERT_EQ(got, want) << "round " << round << ": " << text;
  }
}

// Tens of thousands of secrets (a request's secretEnv; the search for each
// took the event thread half a minute): each is found where it is.
TEST(CoveredBytes, TensOfThousandsOfSecrets) {
  std::vector<std::string> secrets;
  for (int i = 0; i < 40000; ++i) secrets.push_back("value-" + std::to_string(1000000 + i) + "-of-a-secret");
  std::string text(1 << 16, 'x');
  text.replace(1000, secrets[123].size(), secrets[123]);
  text.replace(text.size() - secrets.back().size(), secrets.back().size(), secrets.back());
  const std::vector<bool> covered = sup::covered_bytes(text, secrets);
  ASSERT_EQ(covered.size(), text.size());
  EXPECT_EQ(std::count(covered.begin(), covered.end(), true),
            static_cast<long>(secrets[123].size() + secrets.back().size()));
  EXPECT_TRUE(covered[1000] && covered.back() && !covered[999]);
}
