// Secrets never come out of the log views: masked byte for byte, whatever
// the read offset, even when the command wrote a secret in two pieces.
#include <fcntl.h>
#include <signal.h>

#include <regex>
#include <sstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using SecretsTest = SbxfsTest;

TEST_F(SecretsTest, BothStatusFilesAndTheStepsMaskAWorkingDirectoryAndKeepTheName) {
  const std::string g = "g7-global-secret";
  ASSERT_EQ(write_file(dir_ + "/secrets", "KEY=" + g + "\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  ASSERT_TRUE(start_daemon({"--secrets-file", dir_ + "/secrets"})) << daemon_log();
  for (const char* d : {"/g7-global-secret", "/r9-own-secret"}) ASSERT_EQ(mkdir_errno(dir_ + d), 0);
  ASSERT_EQ(start(R"({"cmd": "sleep 30", "name": "cw", "cwd": ")" + dir_ + "/" + g + "\"}"), "cw");
  ASSERT_EQ(start(R"({"cmd": "sleep 30", "name": "own", "cwd": ")" + dir_ +
                  R"(/r9-own-secret", "secretEnv": {"T": "r9-own-secret"}})"),
            "own");
  const json one = status_json("cw");
  EXPECT_EQ(one["cwd"], dir_ + "/****");
  EXPECT_EQ(status_json("own")["cwd"], dir_ + "/****");
  // The root's list, with every field and the working directories' sizes.
  const std::string root = file("status.json,all");
  for (const std::string& secret : {g, std::string("r9-own-secret")}) {
    EXPECT_EQ(root.find(secret), std::string::npos) << root;
    EXPECT_EQ(file("steps.json").find(secret), std::string::npos) << file("steps.json");
  }
  const json listed = parse_json(root);
  ASSERT_TRUE(listed["procs"].is_array()) << root;
  for (const json& p : listed["procs"]) EXPECT_EQ(p["cwd"], dir_ + "/****") << p.dump();
  // A record named like a secret keeps its name in both views, as
  // `ls procs` shows it: masked, it would name no record.
  ASSERT_EQ(start(R"({"cmd": "true", "name": ")" + g + "\"}"), g);
  const json named = status_json(g);
  EXPECT_EQ(named["bgId"], g);
  EXPECT_EQ(named["logPath"], mnt_ + "/procs/" + g + "/log");
  bool found = false;
  const json again = parse_json(file("status.json,all"));
  for (const json& p : again["procs"]) found = found || p["bgId"] == g;
  EXPECT_TRUE(found) << file("status.json,all");
  // A refused start's step shows the writer's working directory, masked
  // with the request's own secrets too.
  ASSERT_EQ(mkdir_errno(dir_ + "/q5-own-secret"), 0);
  const RunResult r = bash(R"(cd "$T/q5-own-secret" && echo '{"cmd": "true", "name": "cw", "secretEnv": {"T": "q5-own-secret"}}' > "$MNT/cmd")");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(file("steps.json").find("q5-own-secret"), std::string::npos) << file("steps.json");
}

// Two secrets that overlap hide every byte of both; a refused request
// that gives a secret twice (a key repeated) hides both values.
TEST_F(SecretsTest, OverlappingAndRepeatedSecretsAreHiddenWhole) {
  const std::string id = start(R"({"cmd": "echo xyzOVERLAPqrs; sleep 30", "note": "n xyzOVERLAPqrs", )"
                               R"("secretEnv": {"S1": "xyzOVERLAP", "S2": "OVERLAPqrs"}})");
  ASSERT_FALSE(id.empty());
  const json st = status_json(id);
  for (const char* field : {"cmd", "note"}) {
    const std::string shown = st[field];
    EXPECT_EQ(shown.find("qrs"), std::string::npos) << field << ": " << shown;
    EXPECT_EQ(shown.find("xyz"), std::string::npos) << field << ": " << shown;
  }
  EXPECT_EQ(file("procs/" + id + "/cmd"), "echo ****; sleep 30\n");
  EXPECT_NE(write_file(p("cmd"), R"({"cmd": "x", "secretEnv": {"K": "firstSecretAAA", "K": "secondSecretBBB"}})"
                                 "\n"),
            0);
  for (const char* shown : {"errors", "steps.json", "status.json"}) {
    const std::string text = file(shown);
    EXPECT_EQ(text.find("SecretAAA"), std::string::npos) << shown << ": " << text;
    EXPECT_EQ(text.find("SecretBBB"), std::string::npos) << shown << ": " << text;
  }
}

// A command that writes a secret in pieces, with time between them: while
// it runs, no reader is given the beginning of the secret; once it writes
// on (or ends), the secret is masked whole.
TEST_F(SecretsTest, TheBeginningOfASecretWaitsForItsRestWhileTheCommandRuns) {
  const std::string id = start(R"({"cmd": "printf 'pre alphaTok'; while [ ! -e \"$T/go\" ]; do sleep 0.02; done; )"
                               R"(printf 'enValue post\n'", "secretEnv": {"ATOK": "alphaTokenValue"}})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return read_file(state_ + "/procs/" + id + "/log").data == "pre alphaTok"; }, 10s));
  const pid_t follower = spawn_bg("exec cat \"$MNT/procs/" + id + "/log,follow\"", dir_ + "/followed");
  ASSERT_GT(follower, 0);
  const pid_t events = spawn_bg("exec cat \"$MNT/procs/" + id + "/events,follow\"", dir_ + "/events");
  ASSERT_GT(events, 0);
  EXPECT_EQ(file("procs/" + id + "/events").find("alpha"), std::string::npos) << file("procs/" + id + "/events");
  EXPECT_EQ(file("procs/" + id + "/log"), "pre ");
  EXPECT_EQ(file("procs/" + id + "/stdout"), "pre ");
  EXPECT_EQ(file("procs/" + id + "/tail"), "pre ");
  EXPECT_EQ(parse_json(file("procs/" + id + "/status.json,tailBytes=100"))["logTail"], "pre ");
  EXPECT_EQ(parse_json(file("procs/" + id + "/output,timeoutSec=1"))["stdout"], "pre ");
  ASSERT_TRUE(wait_until([&] { return blocked_in_fuse(follower) && blocked_in_fuse(events); }, 10s));
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  EXPECT_EQ(wait_bg(follower, 10s), std::optional<int>(0));
  EXPECT_EQ(read_file(dir_ + "/followed").data, "pre *************** post\n");
  EXPECT_EQ(wait_bg(events, 10s), std::optional<int>(0));
  std::string data;
  std::istringstream lines(read_file(dir_ + "/events").data);
  for (std::string line; std::getline(lines, line);)
    if (const json e = parse_json(line); e.is_object() && e.contains("data")) data += e["data"].get<std::string>();
  EXPECT_EQ(data, "pre *************** post\n") << read_file(dir_ + "/events").data;
  EXPECT_EQ(file("procs/" + id + "/log"), "pre *************** post\n");
}

// When the other stream writes after the beginning, the log shows that
// output (it does not wait on a beginning that may not go on) and the
// beginning as '*'; the same in the timestamped views, the tail, and a
// readiness match on the unfinished line.
TEST_F(SecretsTest, TheBeginningOfASecretFollowedByTheOtherStreamIsMasked) {
  const std::string id =
      start(R"({"cmd": "printf 'pre alphaTok'; while [ ! -e \"$T/then\" ]; do sleep 0.02; done; echo other >&2; )"
            R"(while [ ! -e \"$T/go\" ]; do sleep 0.02; done; printf 'enValue post\n'",)"
            R"( "secretEnv": {"ATOK": "alphaTokenValue"}})");
  ASSERT_FALSE(id.empty());
  const std::string state_log = state_ + "/procs/" + id + "/log";
  ASSERT_TRUE(wait_until([&] { return read_file(state_log).data == "pre alphaTok"; }, 10s));
  ASSERT_EQ(write_file(dir_ + "/then", "", O_WRONLY | O_CREAT), 0);
  ASSERT_TRUE(wait_until([&] { return read_file(state_log).data == "pre alphaTokother\n"; }, 10s));
  const pid_t follower = spawn_bg("exec cat \"$MNT/procs/" + id + "/log,timestamps,follow\"", dir_ + "/followed");
  ASSERT_GT(follower, 0);
  EXPECT_EQ(file("procs/" + id + "/log"), "pre ********other\n");
  EXPECT_EQ(file("procs/" + id + "/tail"), "pre ********other\n");
  EXPECT_EQ(parse_json(file("procs/" + id + "/status.json,tailBytes=100"))["logTail"], "pre ********other\n");
  EXPECT_EQ(file("procs/" + id + "/stdout"), "pre ") << "at the end of its own stream: held";
  EXPECT_EQ(file("procs/" + id + "/stderr"), "other\n");
  for (const std::string view : {"log,timestamps", "stdout,timestamps"})
    EXPECT_EQ(file("procs/" + id + "/" + view).find("alpha"), std::string::npos) << view;
  const json own = parse_json(file("procs/" + id + "/ready,readyLog=^pre"));
  EXPECT_EQ(own["matched"]["text"], "pre ********") << own.dump();
  ASSERT_TRUE(wait_until([&] { return blocked_in_fuse(follower); }, 10s));
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  EXPECT_EQ(wait_bg(follower, 10s), std::optional<int>(0));
  const std::string followed = read_file(dir_ + "/followed").data;
  EXPECT_EQ(followed.find("alpha"), std::string::npos) << followed;
  EXPECT_NE(followed.find(" pre ********other\n"), std::string::npos) << followed;
  EXPECT_EQ(file("procs/" + id + "/log"), "pre ********other\n******* post\n");
}

// A global secret (--secrets-file) is one the users do not know: what is
// held back or masked at a running stream's end must not depend on whether
// the bytes begin it, or a user could learn it a byte at a time by printing
// guesses and reading what is held. A guess that begins it and one that
// does not read the same in every view until the command ends.
TEST_F(SecretsTest, WhatIsHeldTellsNothingOfAGlobalSecret) {
  ASSERT_EQ(write_file(dir_ + "/secrets", "KEY=gl0bal-s3cr3t-value\n", O_WRONLY | O_CREAT | O_TRUNC), 0);
  ASSERT_EQ(kill_daemon(SIGTERM), 0);
  ASSERT_TRUE(start_daemon({"--secrets-file", dir_ + "/secrets"})) << daemon_log();
  for (const std::string guess : {"gl0", "xyz"}) {
    const std::string name = guess == "gl0" ? "hit" : "miss";
    ASSERT_EQ(start(R"({"name": ")" + name + R"(", "cmd": "printf 'line one\\nabc )" + guess +
                    R"('; while [ ! -e \"$T/then\" ]; do sleep 0.02; done; echo other >&2; )"
                    R"(while [ ! -e \"$T/go\" ]; do sleep 0.02; done; printf ' end\\n'"})"),
              name);
    ASSERT_TRUE(wait_until([&] { return read_file(state_ + "/procs/" + name + "/log").data.ends_with(guess); }, 10s));
  }
  const std::vector<std::string> views = {"log", "stdout", "tail", "events", "output,timeoutSec=1", "log,timestamps"};
  // What a view shows with the guess spelt as GUESS, and its time stamps blanked.
  auto shown = [&](const std::string& name, const std::string& view) {
    std::string text = file("procs/" + name + "/" + view);
    const std::string guess = name == "hit" ? "gl0" : "xyz";
    for (std::size_t at = text.find(guess); at != std::string::npos; at = text.find(guess, at)) text.replace(at, 3, "GUESS");
    for (const char* key : {"\"timestamp\":", "\"cursor\":"})
      for (std::size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1))
        text.erase(at, text.find_first_of(",}", at) - at);
    if (view == "log,timestamps") text = std::regex_replace(text, std::regex("[0-9TZ:.-]{20,} "), "");
    if (view.starts_with("output")) {
      json o = parse_json(text);
      o.erase("bgId");
      o.erase("durationMs");
      text = o.dump();
    }
    return text;
  };
  for (const std::string& view : views) {
    EXPECT_EQ(shown("hit", view), shown("miss", view)) << view;
    EXPECT_EQ(shown("miss", view).find("GUESS"), std::string::npos) << view << ": " << shown("miss", view);
  }
  EXPECT_EQ(file("procs/miss/stdout"), "line one\n") << "the unfinished line is held, whatever it is";
  // The other stream writes after it: the log shows it, and the held bytes as '*'.
  ASSERT_EQ(write_file(dir_ + "/then", "", O_WRONLY | O_CREAT), 0);
  for (const std::string name : {"hit", "miss"})
    ASSERT_TRUE(wait_until([&] { return read_file(state_ + "/procs/" + name + "/log").data.ends_with("other\n"); }, 10s));
  for (const std::string& view : views) EXPECT_EQ(shown("hit", view), shown("miss", view)) << view;
  EXPECT_EQ(file("procs/miss/log"), "line one\n*******other\n");
  EXPECT_EQ(parse_json(file("procs/hit/ready,readyLog=^abc"))["matched"]["text"],
            parse_json(file("procs/miss/ready,readyLog=^abc"))["matched"]["text"]);
  // Ended: shown as they are (neither was the secret).
  ASSERT_EQ(write_file(dir_ + "/go", "", O_WRONLY | O_CREAT), 0);
  for (const std::string name : {"hit", "miss"}) EXPECT_EQ(wait_json(name)["proc"]["exitCode"], 0);
  EXPECT_EQ(file("procs/hit/stdout"), "line one\nabc gl0 end\n");
  EXPECT_EQ(file("procs/miss/stdout"), "line one\nabc xyz end\n");
}

TEST_F(SecretsTest, LogViewsMaskSecretsAtEveryOffset) {
  const std::string secret = "hunter2-Very-Secret";
  // The secret reaches the log in two writes, with a pause between them.
  std::string id = start(R"({"cmd": "printf 'key=hunter2-Ve'; sleep 0.2; printf 'ry-Secret;\n'; echo \"$TOKEN\" >&2; echo end",)"
                         R"( "secretEnv": {"TOKEN": ")" + secret + R"("}})");
  ASSERT_FALSE(id.empty());
  wait_ended(id);
  const std::string expect_masked = "key=" + std::string(secret.size(), '*') + ";\n";
  for (const std::string& rel : {"procs/" + id + "/log", "procs/" + id + "/stdout", "procs/" + id + "/stderr",
                                "logs/" + id + ".log"}) {
    std::string body = file(rel);
    EXPECT_EQ(body.find("hunter2"), std::string::npos) << rel << ": " << body;
    EXPECT_EQ(body.find("Secret"), std::string::npos) << rel << ": " << body;
  }
  EXPECT_EQ(file("procs/" + id + "/stdout"), expect_masked + "end\n");
  // The size is the real one, and every (offset, length) read agrees.
  auto r = python(R"PY(
import os
p = os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/log'
whole = open(p, 'rb').read()
assert os.stat(p).st_size == len(whole), (os.stat(p).st_size, len(whole))
assert b'hunter2' not in whole and b'Secret' not in whole, whole
fd = os.open(p, os.O_RDONLY)
for off in range(len(whole)):
    for n in (1, 3, 7, 64):
        got = os.pread(fd, n, off)
        assert got == whole[off:off + n], (off, n, got)
print('ok', len(whole))
)PY", 60, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // The raw file in the state directory is unchanged.
  EXPECT_NE(read_file(state_ + "/procs/" + id + "/log").data.find(secret), std::string::npos);
}

TEST_F(SecretsTest, ASecretWrittenInPiecesWithTheOtherStreamBetweenIsMaskedInTheLog) {
  // stdout writes the secret in two pieces, stderr a line between them: in
  // the log the pieces are apart, in stdout they are whole.
  const std::string secret = "Zq7hunter2SECRETvalue9X";
  const std::string id = start(R"({"cmd": "printf %s Zq7hunt; sleep 0.1; echo progress >&2; sleep 0.1; printf '%s\\n' er2SECRETvalue9X",)"
                               R"( "secretEnv": {"TOK": ")" + secret + R"("}})");
  ASSERT_FALSE(id.empty());
  const json w = wait_json(id);
  ASSERT_EQ(log(id).size(), secret.size() + std::string("progress\n\n").size()) << log(id);
  const std::string masked = std::string(7, '*') + "progress\n" + std::string(16, '*') + "\n";
  EXPECT_EQ(log(id), masked);
  EXPECT_EQ(file("logs/" + id + ".log"), masked);
  EXPECT_EQ(file("procs/" + id + "/stdout"), std::string(secret.size(), '*') + "\n");
  for (const std::string& shown : {file("procs/" + id + "/tail"), w["proc"]["logTail"].get<std::string>(),
                                   file("procs/" + id + "/log,timestamps")}) {
    EXPECT_EQ(shown.find("hunt"), std::string::npos) << shown;
    EXPECT_EQ(shown.find("SECRET"), std::string::npos) << shown;
  }
  // Every (offset, length) read agrees with the whole.
  auto r = python(R"PY(
import os
p = os.environ['MNT'] + '/procs/' + os.environ['ID'] + '/log'
whole = open(p, 'rb').read()
fd = os.open(p, os.O_RDONLY)
for off in range(len(whole)):
    for n in (1, 5, 12):
        assert os.pread(fd, n, off) == whole[off:off + n], off
print('ok')
)PY", 60, {{"ID", id}});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  // The log shows the secret whole too (stdout SEC, stderr RET, stdout
  // RET): both are masked, the log's and stdout's.
  const std::string both = start(R"({"cmd": "printf SEC; sleep 0.1; printf RET >&2; sleep 0.1; echo RET",)"
                                 R"( "secretEnv": {"TOK": "SECRET"}})");
  ASSERT_FALSE(both.empty());
  const json wb = wait_json(both);
  EXPECT_EQ(log(both), "*********\n");
  EXPECT_EQ(file("procs/" + both + "/tail"), "*********\n");
  EXPECT_EQ(wb["proc"]["logTail"], "*********\n");
  EXPECT_EQ(file("procs/" + both + "/stdout"), "******\n");
  EXPECT_EQ(file("procs/" + both + "/stderr"), "RET");
}

// A secret whose pieces the two streams wrote in turn: the events show
// what `log` shows, their data in order being the log, masked alike.
TEST_F(SecretsTest, EventsMaskASecretTheTwoStreamsWroteInTurnAsTheLogDoes) {
  // Each piece once the log holds the one before: the three come in turn.
  const std::string id = start(R"({"cmd": "printf 'xsplit: sup3rS3'; while [ ! -e \"$T/b\" ]; do sleep 0.02; done; )"
                               R"(printf 'cretGl' >&2; while [ ! -e \"$T/c\" ]; do sleep 0.02; done; )"
                               R"(printf 'obal\n'", "secretEnv": {"G": "sup3rS3cretGlobal"}})");
  ASSERT_FALSE(id.empty());
  const std::string state_log = state_ + "/procs/" + id + "/log";
  ASSERT_TRUE(wait_until([&] { return read_file(state_log).data == "xsplit: sup3rS3"; }, 10s));
  ASSERT_EQ(write_file(dir_ + "/b", "", O_WRONLY | O_CREAT), 0);
  ASSERT_TRUE(wait_until([&] { return read_file(state_log).data == "xsplit: sup3rS3cretGl"; }, 10s));
  ASSERT_EQ(write_file(dir_ + "/c", "", O_WRONLY | O_CREAT), 0);
  wait_json(id);
  const std::string log_text = log(id);
  std::string data;
  std::istringstream lines(file("procs/" + id + "/events"));
  for (std::string line; std::getline(lines, line);)
    if (const json e = parse_json(line); e.is_object() && e.contains("data")) data += e["data"].get<std::string>();
  EXPECT_EQ(data, log_text);
  EXPECT_EQ(data, "xsplit: *****************\n");
}

TEST_F(SecretsTest, ReadinessShowsNoPartOfASecret) {
  // The line holds the secret; the conditions name it or end inside it.
  std::string id = start(R"({"cmd": "echo \"key=$TOKEN ok\"; exec sleep 30", "name": "sr",)"
                         R"( "secretEnv": {"TOKEN": "hunter2"}, "readyLog": "hunter2"})");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(wait_until([&] { return status_json(id)["ready"] == true; }, 10s)) << status_json(id).dump();
  for (const std::string& rel : {std::string("status.json"), std::string("status.json,all"), "procs/" + id + "/status.json",
                                 "procs/" + id + "/ready", "procs/" + id + "/ready,readyLog=.{6}"}) {
    const std::string body = file(rel);
    EXPECT_EQ(body.find("hunter2"), std::string::npos) << rel << ": " << body;
    EXPECT_EQ(body.find("hunt"), std::string::npos) << rel << ": " << body;
    EXPECT_EQ(body.find("ter2"), std::string::npos) << rel << ": " << body;
  }
  EXPECT_EQ(status_json(id)["readyWhen"], "log ****");
  const json own = parse_json(file("procs/" + id + "/ready,readyLog==.{6}"));
  EXPECT_EQ(own["matched"]["match"], "=******") << own.dump();
  EXPECT_EQ(own["matched"]["text"], "key=******* ok") << own.dump();
  EXPECT_EQ(own["readyWhen"], "log =.{6}");
  // A reader's own condition naming the secret is masked in its answer too.
  EXPECT_EQ(parse_json(file("procs/" + id + "/ready,readyLog=y.hunter2"))["readyWhen"], "log y.****");
}

}  // namespace
}  // namespace sbxit
