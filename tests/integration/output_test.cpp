// procs/ID/output: stdout, stderr and the end of a command in one blocking read.
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using OutputTest = SbxfsTest;

TEST_F(OutputTest, BlocksThenAnswersBothStreams) {
  std::string id = start("while [ ! -e '" + dir_ + "/go' ]; do sleep 0.05; done; echo out; echo err >&2; exit 4");
  ASSERT_FALSE(id.empty());
  const std::string out = dir_ + "/output.out";
  pid_t reader = spawn_bg("exec cat \"$MNT/procs/" + id + "/output\"", out);
  EXPECT_FALSE(wait_until([&] { return !read_file(out).data.empty(); }, 300ms)) << "output answered early";
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  auto rc = wait_bg(reader, 10s);
  ASSERT_TRUE(rc.has_value());
  EXPECT_EQ(*rc, 0);
  auto o = parse_json(read_file(out).data);
  ASSERT_TRUE(o.is_object()) << read_file(out).data;
  EXPECT_EQ(o["stdout"], "out\n");
  EXPECT_EQ(o["stderr"], "err\n");
  EXPECT_EQ(o["exitCode"], 4);
  EXPECT_TRUE(o["signal"].is_null());
  EXPECT_EQ(o["timedOut"], false);
  EXPECT_EQ(o["truncated"], false);
  EXPECT_TRUE(o["durationMs"].is_number_integer());
  EXPECT_GE(o["durationMs"].get<long>(), 0);
  EXPECT_EQ(o["stillRunning"], false);
}

TEST_F(OutputTest, ThreeMebibytesOfStdoutKeepTheirEnd) {
  // 3 MiB of numbered lines on stdout, a little on stderr.
  std::string id = start(
      "i=0; while [ $i -lt 49152 ]; do printf '%063d\\n' $i; i=$((i+1)); done; echo tail-line; "
      "echo small >&2");
  ASSERT_FALSE(id.empty());
  auto r = run("cat \"$MNT/procs/$ID/output\"", 60, {{"ID", id}});
  ASSERT_EQ(r.code, 0) << r.err;
  auto o = parse_json(r.out);
  ASSERT_TRUE(o.is_object()) << r.out.substr(0, 200);
  const std::string s = o["stdout"];
  EXPECT_EQ(s.size(), 1u << 20);
  EXPECT_TRUE(s.ends_with("0000000000000000000000000000000000000000000000000000000049151\ntail-line\n"))
      << s.substr(s.size() - 200);
  EXPECT_EQ(o["stderr"], "small\n");
  EXPECT_EQ(o["truncated"], true);
  EXPECT_EQ(o["stdoutTruncated"], true);
  EXPECT_EQ(o["stderrTruncated"], false);
  EXPECT_EQ(o["stdoutBytes"], 49152u * 64 + 10);
  EXPECT_EQ(o["exitCode"], 0);
}

TEST_F(OutputTest, InvalidUtf8IsEscapedNotDropped) {
  std::string id = start("printf 'ok \\303\\251 bad \\377\\376 x\\n'; printf '\\300\\257' >&2");
  ASSERT_FALSE(id.empty());
  auto o = parse_json(run("cat \"$MNT/procs/$ID/output\"", 10, {{"ID", id}}).out);
  ASSERT_TRUE(o.is_object());
  EXPECT_EQ(o["stdout"], "ok \xC3\xA9 bad \\xFF\\xFE x\n");
  EXPECT_EQ(o["stderr"], "\\xC0\\xAF");  // an overlong '/' is invalid
  EXPECT_EQ(o["escapedBytes"]["stdout"], 2);
  EXPECT_EQ(o["escapedBytes"]["stderr"], 2);
}

TEST_F(OutputTest, SecretsAreMasked) {
  std::string id = start(R"({"cmd": "echo token=$TOK; echo $TOK >&2", "secretEnv": {"TOK": "s3cr3tvalue"}})");
  ASSERT_FALSE(id.empty());
  auto r = run("cat \"$MNT/procs/$ID/output\"", 10, {{"ID", id}});
  EXPECT_EQ(r.out.find("s3cr3tvalue"), std::string::npos) << r.out;
  auto o = parse_json(r.out);
  EXPECT_EQ(o["stdout"], "token=****\n");
  EXPECT_EQ(o["stderr"], "****\n");
}

// A cap that falls inside a secret shows none of it: the secret is found
// in the bytes around the cut, and what of it the cap keeps is "****".
TEST_F(OutputTest, ACapInsideASecretShowsNoPartOfIt) {
  std::string id = start(R"({"cmd": "printf 'xx alphaTokenValue\n'", "secretEnv": {"ATOK": "alphaTokenValue"}})");
  ASSERT_FALSE(id.empty());
  for (const auto& [max, shown] : std::vector<std::pair<std::string, std::string>>{
           {"19", "xx ****\n"}, {"10", "****\n"}, {"5", "****\n"}, {"3", "****\n"}}) {
    auto o = parse_json(run("cat \"$MNT/procs/$ID/output,maxBytes=" + max + "\"", 10, {{"ID", id}}).out);
    ASSERT_TRUE(o.is_object()) << max;
    EXPECT_EQ(o["stdout"], shown) << "maxBytes=" << max;
    EXPECT_EQ(o["stdoutTruncated"], max != "19") << max;
    EXPECT_EQ(o["stdoutBytes"], 19) << max;
  }
  // Two of them: the first one's end, before the cut, is no part of what is shown.
  id = start(R"({"cmd": "printf 'alphaTokenValue\nalphaTokenValue\n'", "secretEnv": {"ATOK": "alphaTokenValue"}})");
  ASSERT_FALSE(id.empty());
  auto o = parse_json(run("cat \"$MNT/procs/$ID/output,maxBytes=20\"", 10, {{"ID", id}}).out);
  EXPECT_EQ(o["stdout"], "****\n****\n");
}

TEST_F(OutputTest, KilledCommandReportsItsSignal) {
  std::string id = start("echo started; sleep 30");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return log(id) == "started\n"; }, 5s));
  EXPECT_EQ(run("echo KILL > \"$MNT/procs/$ID/signal\"", 10, {{"ID", id}}).code, 0);
  auto o = parse_json(run("cat \"$MNT/procs/$ID/output\"", 10, {{"ID", id}}).out);
  ASSERT_TRUE(o.is_object());
  EXPECT_EQ(o["signal"], "SIGKILL");
  EXPECT_EQ(o["exitCode"], -1);
  EXPECT_EQ(o["stdout"], "started\n");
}

class OutputCapTest : public SbxfsTest {
 protected:
  OutputCapTest() { daemon_options_ = {"-o", "output_max=10,wait_timeout=1"}; }
};

TEST_F(OutputCapTest, CapOptionAndWaitCap) {
  std::string id = start("echo 0123456789abcdef; echo e >&2");
  ASSERT_FALSE(id.empty());
  auto o = parse_json(run("cat \"$MNT/procs/$ID/output\"", 10, {{"ID", id}}).out);
  ASSERT_TRUE(o.is_object());
  EXPECT_EQ(o["stdout"], "789abcdef\n");
  EXPECT_EQ(o["stderr"], "e\n");
  EXPECT_EQ(o["truncated"], true);

  std::string slow = start("echo partial; sleep 30");
  ASSERT_FALSE(slow.empty());
  ASSERT_TRUE(wait_until([&] { return log(slow) == "partial\n"; }, 5s));
  auto r = run("cat \"$MNT/procs/$ID/output\"", 10, {{"ID", slow}});
  EXPECT_LT(r.seconds, 5.0);
  auto s = parse_json(r.out);
  ASSERT_TRUE(s.is_object()) << r.out;
  EXPECT_EQ(s["stillRunning"], true);
  EXPECT_TRUE(s["exitCode"].is_null());
  EXPECT_EQ(s["stdout"], "partial\n");
}

}  // namespace
}  // namespace sbxit
