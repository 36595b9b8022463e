// Request parsing: plain text, JSON with every request key of sbxfs.5, and every way
// a request can be malformed (each an invalid_argument naming the problem).
#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>

#include "tests/supervisor/test_util.hpp"

namespace {

using nlohmann::json;
using sup::Errc;
using sbxtest::describe;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The result is invalid_argument and its message mentions one of `needles`
// (case-insensitive).
template <class T>
::testing::AssertionResult IsInvalid(const sup::Result<T>& r, std::initializer_list<const char*> needles) {
  if (r.ok()) return ::testing::AssertionFailure() << "accepted";
  if (r.error().code != Errc::invalid_argument)
    return ::testing::AssertionFailure() << "wrong code: " << describe(r.error());
  const std::string msg = lower(r.error().message);
  if (needles.size() == 0) {
    if (msg.empty()) return ::testing::AssertionFailure() << "empty message";
    return ::testing::AssertionSuccess();
  }
  for (const char* n : needles)
    if (msg.find(lower(n)) != std::string::npos) return ::testing::AssertionSuccess();
  std::string want;
  for (const char* n : needles) want += std::string(" '") + n + "'";
  return ::testing::AssertionFailure() << "message \"" << r.error().message << "\" names none of" << want;
}

sup::Result<sup::StartSpec> parse_json_text(const std::string& text, const std::string& cwd = "/tmp") {
  return sup::parse_json_request(json::parse(text), cwd);
}

std::vector<std::string> sh_argv(const std::string& cmd) { return {"/bin/sh", "-c", cmd}; }

// ---- plain text -------------------------------------------------------------

TEST(ParseText, TrailingNewlineIsDropped) {
  auto r = sup::parse_text_request("echo hi\n", "/tmp");
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(r->shell.has_value());
  EXPECT_EQ(*r->shell, "echo hi");
  EXPECT_TRUE(r->argv.empty());
  EXPECT_EQ(r->cwd, "/tmp");
  EXPECT_EQ(r->effective_argv(), sh_argv("echo hi"));
  EXPECT_TRUE(r->name.empty());
  EXPECT_FALSE(r->timeout_sec.has_value());
  EXPECT_DOUBLE_EQ(r->stop_grace_sec, 5);
}

TEST(ParseText, WithoutNewlineIsKeptAsIs) {
  auto r = sup::parse_text_request("printf '%s' \"$X\"", "/");
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->shell.value_or(""), "printf '%s' \"$X\"");
  EXPECT_EQ(r->cwd, "/");
}

TEST(ParseText, OnlyOneTrailingNewlineIsDropped) {
  auto r = sup::parse_text_request("echo a\necho b\n\n", "/tmp");
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->shell.value_or(""), "echo a\necho b\n");
}

TEST(ParseText, EmptyCommandIsInvalid) {
  EXPECT_TRUE(IsInvalid(sup::parse_text_request("", "/tmp"), {"empty", "command"}));
  EXPECT_TRUE(IsInvalid(sup::parse_text_request("\n", "/tmp"), {"empty", "command"}));
  EXPECT_TRUE(IsInvalid(sup::parse_request("", "/tmp"), {"empty", "command"}));
}

// ---- parse_request picks the form ------------------------------------------

TEST(ParseRequest, JsonWhenFirstNonBlankIsBrace) {
  auto r = sup::parse_request("  \n\t{\"cmd\": \"make -j4\"}\n", "/tmp");
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->shell.value_or(""), "make -j4");
  EXPECT_EQ(r->effective_argv(), sh_argv("make -j4"));
}

TEST(ParseRequest, TextOtherwise) {
  auto r = sup::parse_request("echo {\"cmd\": 1}\n", "/tmp");
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->shell.value_or(""), "echo {\"cmd\": 1}");
}

TEST(ParseRequest, MalformedJsonIsInvalid) {
  EXPECT_TRUE(IsInvalid(sup::parse_request("{\"cmd\": \"x\"", "/tmp"), {}));
  EXPECT_TRUE(IsInvalid(sup::parse_request("{ not json }", "/tmp"), {}));
  // Where it broke, in the reader's words, without the parser's own tag.
  const auto r = sup::parse_request("{ not json }", "/tmp");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message.rfind("malformed JSON: parse error at line 1, column 4: ", 0), 0u) << r.error().message;
  EXPECT_EQ(r.error().message.find("json.exception"), std::string::npos) << r.error().message;
}

// ---- JSON -------------------------------------------------------------------

// The JSON parser takes a NUL byte for the end of its input: an object
// followed by one and anything else started, the rest unread (audit).
TEST(ParseRequest, ANulByteInJsonIsInvalidWhereverItIs) {
  const std::string nul(1, '\0');
  for (const std::string& text : {"{\"cmd\":\"true\"}" + nul + "{\"oops\":1}", "{\"cmd\":\"true\"} " + nul,
                                 "{\"cmd\":\"tr" + nul + "ue\"}"}) {
    auto r = sup::parse_request(text, "/");
    ASSERT_FALSE(r) << text.size();
    EXPECT_EQ(r.error().code, sup::Errc::invalid_argument);
    EXPECT_EQ(r.error().message.rfind("malformed JSON: a NUL byte at byte ", 0), 0u) << r.error().message;
  }
}

TEST(ParseJson, EveryKey) {
  auto r = parse_json_text(R"({
      "argv": ["/bin/echo", "a b", "$HOME"],
      "cwd": "/srv",
      "env": {"A": "1", "B": ""},
      "secretEnv": {"TOKEN": "s3cret"},
      "note": "a note",
      "name": "web-1",
      "timeoutSec": 2.5,
      "stopGraceSec": 0})");
  SBX_ASSERT_OK(r);
  const auto& s = r.value();
  EXPECT_EQ(s.argv, (std::vector<std::string>{"/bin/echo", "a b", "$HOME"}));
  EXPECT_FALSE(s.shell.has_value());
  EXPECT_EQ(s.effective_argv(), s.argv);
  EXPECT_EQ(s.cwd, "/srv");
  EXPECT_EQ(s.env, (std::map<std::string, std::string>{{"A", "1"}, {"B", ""}}));
  EXPECT_EQ(s.secret_env, (std::map<std::string, std::string>{{"TOKEN", "s3cret"}}));
  EXPECT_EQ(s.note, "a note");
  EXPECT_EQ(s.name, "web-1");
  ASSERT_TRUE(s.timeout_sec.has_value());
  EXPECT_DOUBLE_EQ(*s.timeout_sec, 2.5);
  EXPECT_DOUBLE_EQ(s.stop_grace_sec, 0);
}

TEST(ParseJson, AKeyGivenTwiceInOneObjectIsRefused) {
  EXPECT_TRUE(IsInvalid(sup::parse_request(R"({"cmd": "true", "cmd": "false"})", "/tmp"), {"\"cmd\"", "twice"}));
  EXPECT_TRUE(IsInvalid(sup::parse_request(R"({"cmd": "env", "env": {"A": "1", "A": "2"}})", "/tmp"), {"\"A\"", "twice"}));
  // The same key in different objects is no repetition.
  SBX_EXPECT_OK(sup::parse_request(R"({"cmd": "env", "env": {"cmd": "x"}, "secretEnv": {"cmd": "y"}})", "/tmp"));
}

TEST(ParseJson, CmdFormAndDefaults) {
  auto r = parse_json_text(R"({"cmd": "make -j4"})", "/work/app");
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->shell.value_or(""), "make -j4");
  EXPECT_TRUE(r->argv.empty());
  EXPECT_EQ(r->effective_argv(), sh_argv("make -j4"));
  EXPECT_EQ(r->cwd, "/work/app");  // default_cwd fills a missing cwd
  EXPECT_TRUE(r->env.empty());
  EXPECT_TRUE(r->secret_env.empty());
  EXPECT_TRUE(r->note.empty());
  EXPECT_TRUE(r->name.empty());
  EXPECT_FALSE(r->timeout_sec.has_value());
  EXPECT_DOUBLE_EQ(r->stop_grace_sec, 5);
}

TEST(ParseJson, IntegerSecondsAreNumbers) {
  auto r = parse_json_text(R"({"cmd": "x", "timeoutSec": 60, "stopGraceSec": 1})");
  SBX_ASSERT_OK(r);
  EXPECT_DOUBLE_EQ(r->timeout_sec.value_or(0), 60);
  EXPECT_DOUBLE_EQ(r->stop_grace_sec, 1);
}

// sbxfs.5 lists readyPort/readyLog/readyHttp as request keys; spec.hpp says
// they are left to the caller. Either way they must not be "unknown keys".
TEST(ParseJson, ReadyKeysAreNotRejected) {
  SBX_EXPECT_OK(parse_json_text(R"({"cmd": "x", "readyPort": 3000, "readyHttp": "/health"})"));
  SBX_EXPECT_OK(parse_json_text(R"({"cmd": "x", "readyLog": "listening on [0-9]+"})"));
}

TEST(ParseJson, UnknownKeyIsNamed) {
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "bogusKey": 1})"), {"bogusKey"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "timeout": 5})"), {"timeout"}));
}

TEST(ParseJson, NotAnObject) {
  EXPECT_TRUE(IsInvalid(sup::parse_json_request(json::array({"echo"}), "/tmp"), {}));
  EXPECT_TRUE(IsInvalid(sup::parse_json_request(json("echo"), "/tmp"), {}));
}

TEST(ParseJson, WrongTypesNameTheKey) {
  struct Case {
    const char* text;
    const char* key;
  };
  const Case cases[] = {
      {R"({"argv": "/bin/echo hi"})", "argv"},
      {R"({"argv": ["/bin/echo", 1]})", "argv"},
      {R"({"argv": [null]})", "argv"},
      {R"({"cmd": 5})", "cmd"},
      {R"({"cmd": ["echo"]})", "cmd"},
      {R"({"cmd": "x", "cwd": 5})", "cwd"},
      {R"({"cmd": "x", "env": ["A=1"]})", "env"},
      {R"({"cmd": "x", "env": {"A": 1}})", "env"},
      {R"({"cmd": "x", "secretEnv": {"T": true}})", "secretEnv"},
      {R"({"cmd": "x", "secretEnv": "T=1"})", "secretEnv"},
      {R"({"cmd": "x", "note": 1})", "note"},
      {R"({"cmd": "x", "name": 7})", "name"},
      {R"({"cmd": "x", "timeoutSec": "10"})", "timeoutSec"},
      {R"({"cmd": "x", "timeoutSec": true})", "timeoutSec"},
      {R"({"cmd": "x", "stopGraceSec": "1"})", "stopGraceSec"},
  };
  for (const auto& c : cases) EXPECT_TRUE(IsInvalid(parse_json_text(c.text), {c.key})) << c.text;
}

TEST(ParseJson, ExactlyOneOfArgvAndCmd) {
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "argv": ["/bin/true"]})"), {"argv", "cmd"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cwd": "/tmp"})"), {"argv", "cmd"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({})"), {"argv", "cmd"}));
}

TEST(ParseJson, EmptyCommand) {
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": ""})"), {"empty", "cmd"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"argv": []})"), {"empty", "argv"}));
}

TEST(ParseJson, TimeoutMustBePositive) {
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "timeoutSec": 0})"), {"timeoutSec"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "timeoutSec": -1})"), {"timeoutSec"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "timeoutSec": -0.001})"), {"timeoutSec"}));
  auto r = parse_json_text(R"({"cmd": "x", "timeoutSec": 0.3})");
  SBX_ASSERT_OK(r);
  EXPECT_DOUBLE_EQ(r->timeout_sec.value_or(0), 0.3);
}

TEST(ParseJson, StopGraceMustNotBeNegative) {
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "stopGraceSec": -0.5})"), {"stopGraceSec"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "stopGraceSec": -1})"), {"stopGraceSec"}));
  SBX_EXPECT_OK(parse_json_text(R"({"cmd": "x", "stopGraceSec": 0})"));
}

TEST(ParseJson, BadNameIsRejected) {
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "name": "a/b"})"), {"name", "a/b"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "name": ".."})"), {"name", ".."}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "name": ""})"), {"name"}));
}

// ---- names ------------------------------------------------------------------

TEST(ValidateName, Accepts) {
  for (const std::string& n : {std::string("a"), std::string("web-1"), std::string("A.b_C-9"),
                               std::string("0001"), std::string(64, 'x')})
    SBX_EXPECT_OK(sup::validate_name(n)) << n;
}

TEST(ValidateName, Rejects) {
  const std::string bad[] = {
      "",
      ".",
      "..",
      "a/b",
      "/abs",
      std::string(65, 'x'),
      "a\nb",
      "tab\there",
      std::string("nul\0x", 5),
      "\x01",
      "del\x7f",
      "a b",
      "caf\xc3\xa9",
  };
  for (const auto& n : bad) {
    auto r = sup::validate_name(n);
    ASSERT_FALSE(r.ok()) << "accepted name \"" << n << "\"";
    EXPECT_EQ(r.error().code, n.size() > 64 ? Errc::name_too_long : Errc::invalid_argument) << n;
    EXPECT_FALSE(r.error().message.empty()) << n;
  }
}

TEST(ValidateName, LeadingDotIsRejectedButStoredOnesStillLoad) {
  for (const std::string n : {".new-x", ".del-x.1", ".hidden"}) {
    auto r = sup::validate_name(n);
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error().code, Errc::invalid_argument);
    SBX_EXPECT_OK(sup::validate_stored_name(n)) << n;  // an older build made them
  }
  EXPECT_FALSE(sup::validate_stored_name("..").ok());
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "name": ".new-web"})"), {"name", "'.'"}));
}

// ---- spec.json round trip ---------------------------------------------------

TEST(SpecJson, RoundTripArgv) {
  sup::StartSpec s;
  s.argv = {"/bin/echo", "a b", ""};
  s.cwd = "/tmp";
  s.env = {{"A", "1"}};
  s.secret_env = {{"TOKEN", "s3cret"}};
  s.note = "n";
  s.name = "web-1";
  s.timeout_sec = 1.5;
  s.stop_grace_sec = 0.25;
  s.requester_sid = 1234;
  auto r = sup::spec_from_json(sup::spec_to_json(s));
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->argv, s.argv);
  EXPECT_FALSE(r->shell.has_value());
  EXPECT_EQ(r->cwd, s.cwd);
  EXPECT_EQ(r->env, s.env);
  EXPECT_EQ(r->secret_env, s.secret_env);
  EXPECT_EQ(r->note, s.note);
  EXPECT_EQ(r->name, s.name);
  EXPECT_EQ(r->timeout_sec, s.timeout_sec);
  EXPECT_DOUBLE_EQ(r->stop_grace_sec, s.stop_grace_sec);
  EXPECT_EQ(r->requester_sid, s.requester_sid);
}

TEST(SpecJson, ShellFormStoresShellAndArgv) {
  sup::StartSpec s;
  s.shell = "make && make test";
  s.cwd = "/tmp";
  json j = sup::spec_to_json(s);
  EXPECT_EQ(j.value("shell", ""), "make && make test");
  EXPECT_EQ(j["argv"], json(sh_argv("make && make test")));
  auto r = sup::spec_from_json(j);
  SBX_ASSERT_OK(r);
  EXPECT_EQ(r->shell.value_or(""), "make && make test");
  EXPECT_EQ(r->effective_argv(), sh_argv("make && make test"));
  EXPECT_FALSE(r->timeout_sec.has_value());
}

}  // namespace

// ---- supervision options (restart, restartDelaySec, maxRestarts, queue) ----

namespace {

TEST(ParseJson, SupervisionOptions) {
  auto r = parse_json_text(R"({"cmd": "x", "restart": "on-failure", "restartDelaySec": 0.5, "maxRestarts": 3,
                               "queue": true})");
  ASSERT_TRUE(r.ok()) << describe(r.error());
  EXPECT_EQ(r.value().restart, sup::RestartPolicy::on_failure);
  EXPECT_DOUBLE_EQ(r.value().restart_delay_sec, 0.5);
  ASSERT_TRUE(r.value().max_restarts.has_value());
  EXPECT_EQ(*r.value().max_restarts, 3u);
  EXPECT_TRUE(r.value().queue);
  auto always = parse_json_text(R"({"cmd": "x", "restart": "always", "maxRestarts": 0})");
  ASSERT_TRUE(always.ok());
  EXPECT_EQ(always.value().restart, sup::RestartPolicy::always);
  EXPECT_EQ(always.value().max_restarts, std::optional<std::uint64_t>(0));
  // The defaults: no restarts, a first delay of 1 s, no limit, no queue.
  auto plain = parse_json_text(R"({"cmd": "x"})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.value().restart, sup::RestartPolicy::no);
  EXPECT_DOUBLE_EQ(plain.value().restart_delay_sec, 1);
  EXPECT_FALSE(plain.value().max_restarts.has_value());
  EXPECT_FALSE(plain.value().queue);
  EXPECT_EQ(parse_json_text(R"({"cmd": "x", "restart": "no"})").value().restart, sup::RestartPolicy::no);
}

TEST(ParseJson, BadSupervisionOptionsNameTheKey) {
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "restart": "sometimes"})"), {"'restart'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "restart": true})"), {"'restart'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "restart": "On-Failure"})"), {"'restart'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "restartDelaySec": 0})"), {"'restartDelaySec'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "restartDelaySec": -1})"), {"'restartDelaySec'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "restartDelaySec": "1"})"), {"'restartDelaySec'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "restartDelaySec": 1e9})"), {"'restartDelaySec'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "maxRestarts": -1})"), {"'maxRestarts'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "maxRestarts": 1.5})"), {"'maxRestarts'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "maxRestarts": 2.0})"),
                        {"not 2.0 (a whole number is digits alone, without a point or an exponent)"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "maxRestarts": "3"})"), {"not string"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "maxRestarts": "2"})"), {"'maxRestarts'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "queue": "yes"})"), {"'queue'"}));
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "queue": 1})"), {"'queue'"}));
  // The list of known keys names them.
  EXPECT_TRUE(IsInvalid(parse_json_text(R"({"cmd": "x", "restarts": 1})"), {"maxRestarts queue"}));
}

TEST(SpecJson, SupervisionOptionsRoundTrip) {
  auto r = parse_json_text(R"({"cmd": "x", "restart": "always", "restartDelaySec": 2.5, "maxRestarts": 7,
                               "queue": true})");
  ASSERT_TRUE(r.ok());
  auto back = sup::spec_from_json(sup::spec_to_json(r.value()));
  ASSERT_TRUE(back.ok()) << describe(back.error());
  EXPECT_EQ(back.value().restart, sup::RestartPolicy::always);
  EXPECT_DOUBLE_EQ(back.value().restart_delay_sec, 2.5);
  EXPECT_EQ(back.value().max_restarts, std::optional<std::uint64_t>(7));
  EXPECT_TRUE(back.value().queue);
  auto plain = sup::spec_from_json(sup::spec_to_json(parse_json_text(R"({"cmd": "x"})").value()));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.value().restart, sup::RestartPolicy::no);
  EXPECT_FALSE(plain.value().max_restarts.has_value());
  EXPECT_FALSE(plain.value().queue);
}

}  // namespace
