// A command's standard input through the supervisor (stdin: "pipe"):
// write_stdin reaches it and never blocks, a full pipe says so and a
// stdin_writable event follows once there is room, close_stdin ends the
// input, a reader gone is broken_pipe (EPIPE, no SIGPIPE), and the input
// outlives the Supervisor that wrote to it.
#include <signal.h>

#include <atomic>

#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::Errc;

using SupervisorStdinTest = SupervisorTest;

sup::StartSpec piped(sup::StartSpec s) {
  s.stdin_pipe = true;
  return s;
}

TEST_F(SupervisorStdinTest, WritesReachTheCommandAndCloseEndsTheInput) {
  auto r = sup_->start(piped(argv({"cat"})));
  SBX_ASSERT_OK(r);
  auto n = sup_->write_stdin(r->bg_id, "abc\n");
  SBX_ASSERT_OK(n);
  EXPECT_EQ(*n, 4u);
  ASSERT_TRUE(wait_for_text(r->log_file, "abc\n"));
  SBX_ASSERT_OK(sup_->close_stdin(r->bg_id));
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
  EXPECT_EQ(read_file(r->log_file), "abc\n");
  // Ended: writes are broken_pipe, a close changes nothing.
  auto late = sup_->write_stdin(r->bg_id, "x");
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, Errc::broken_pipe) << late.error().message;
  SBX_ASSERT_OK(sup_->close_stdin(r->bg_id));
}

// For a writer that must not wait: all at once (the pipe grown to hold
// it), or nothing, try_again or too_big.
TEST_F(SupervisorStdinTest, AWholeWriteGoesInAtOnceOrNotAtAll) {
  auto r = sup_->start(piped(shell("kill -STOP $$; exec wc -c")));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_until([&] {
    auto f = proc_stat_fields(r->pid);
    return !f.empty() && f[0] == "T";
  }, 5000ms));
  const std::size_t most = std::stoul(read_file("/proc/sys/fs/pipe-max-size"));
  auto n = sup_->write_stdin_whole(r->bg_id, std::string(200000, 'x'));  // 3 times a pipe's default
  SBX_ASSERT_OK(n);
  EXPECT_EQ(*n, 200000u);
  auto big = sup_->write_stdin_whole(r->bg_id, std::string(most + 1, 'x'));
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, Errc::too_big) << big.error().message;
  auto crowded = sup_->write_stdin_whole(r->bg_id, std::string(most - 100000, 'x'));
  ASSERT_FALSE(crowded.ok());
  EXPECT_EQ(crowded.error().code, Errc::try_again) << crowded.error().message;
  SBX_ASSERT_OK(sup_->signal(r->bg_id, SIGCONT));
  SBX_ASSERT_OK(sup_->close_stdin(r->bg_id));
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(read_file(r->log_file), "200000\n");
}

TEST_F(SupervisorStdinTest, AFullPipeTakesNothingAndTellsWhenItHasRoom) {
  // Stops itself before it reads: the pipe fills.
  auto r = sup_->start(piped(shell("kill -STOP $$; exec cat > /dev/null")));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_until([&] {
    auto f = proc_stat_fields(r->pid);
    return !f.empty() && f[0] == "T";
  }, 5000ms));
  std::atomic<int> room{0};
  const std::uint64_t token = sup_->subscribe([&](const sup::Event& e) {
    if (e.kind == sup::Event::Kind::stdin_writable && e.bg_id == r->bg_id) ++room;
  });
  const std::string chunk(256 * 1024, 'x');
  std::size_t total = 0;
  for (int i = 0; i < 64; ++i) {
    auto n = sup_->write_stdin(r->bg_id, chunk);
    SBX_ASSERT_OK(n);
    if (*n == 0) break;
    total += *n;
  }
  EXPECT_GT(total, 0u);
  EXPECT_LT(total, 64 * chunk.size()) << "the pipe never filled";
  std::this_thread::sleep_for(300ms);  // the window measured, not a synchronisation
  EXPECT_EQ(room.load(), 0) << "room was announced while the pipe was full";
  SBX_ASSERT_OK(sup_->signal(r->bg_id, SIGCONT));
  EXPECT_TRUE(wait_until([&] { return room.load() > 0; }, 5000ms));
  auto more = sup_->write_stdin(r->bg_id, chunk);
  SBX_ASSERT_OK(more);
  EXPECT_GT(*more, 0u);
  sup_->unsubscribe(token);
  SBX_ASSERT_OK(sup_->close_stdin(r->bg_id));
  auto st = wait_ended(r->bg_id);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->exit_code, 0);
}

TEST_F(SupervisorStdinTest, AReaderGoneIsBrokenPipeWithoutSigpipe) {
  auto r = sup_->start(piped(shell("read x; exec 0<&-; echo closed; exec sleep 30")));
  SBX_ASSERT_OK(r);
  SBX_ASSERT_OK(sup_->write_stdin(r->bg_id, "go\n"));
  ASSERT_TRUE(wait_for_text(r->log_file, "closed"));
  // The pipe is open here: this write(2) itself finds no reader.
  auto n = sup_->write_stdin(r->bg_id, "again\n");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, Errc::broken_pipe);
  EXPECT_NE(n.error().message.find("no longer reads"), std::string::npos) << n.error().message;
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  EXPECT_TRUE(wait_ended(r->bg_id));
}

TEST_F(SupervisorStdinTest, ACommandWithoutAPipeHasNoInputToWrite) {
  auto r = sup_->start(argv({"sleep", "30"}));
  SBX_ASSERT_OK(r);
  auto n = sup_->write_stdin(r->bg_id, "x");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, Errc::broken_pipe);
  auto c = sup_->close_stdin(r->bg_id);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, Errc::broken_pipe);
  EXPECT_EQ(sup_->write_stdin("nope", "x").error().code, Errc::not_found);
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  EXPECT_TRUE(wait_ended(r->bg_id));
}

TEST_F(SupervisorStdinTest, TheInputOutlivesTheSupervisor) {
  auto r = sup_->start(piped(shell("cat; echo eof; exec sleep 30")));
  SBX_ASSERT_OK(r);
  SBX_ASSERT_OK(sup_->write_stdin(r->bg_id, "one\n"));
  ASSERT_TRUE(wait_for_text(r->log_file, "one\n"));
  reopen();
  auto again = sup_->status(r->bg_id);
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->running);
  SBX_ASSERT_OK(sup_->write_stdin(r->bg_id, "two\n"));
  SBX_ASSERT_OK(sup_->close_stdin(r->bg_id));
  ASSERT_TRUE(wait_for_text(r->log_file, "eof\n"));
  EXPECT_EQ(read_file(r->log_file), "one\ntwo\neof\n");
  // The close is kept in the state directory: a later Supervisor knows it.
  reopen();
  auto n = sup_->write_stdin(r->bg_id, "three\n");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.error().code, Errc::broken_pipe);
  EXPECT_NE(n.error().message.find("closed"), std::string::npos) << n.error().message;
  SBX_ASSERT_OK(sup_->stop(r->bg_id));
  EXPECT_TRUE(wait_ended(r->bg_id));
}

TEST_F(SupervisorStdinTest, TheRequestKeyRoundTrips) {
  auto spec = sup::parse_request(R"({"cmd": "cat", "stdin": "pipe"})", "/");
  SBX_ASSERT_OK(spec);
  EXPECT_TRUE(spec->stdin_pipe);
  auto back = sup::spec_from_json(sup::spec_to_json(*spec));
  SBX_ASSERT_OK(back);
  EXPECT_TRUE(back->stdin_pipe);
  for (const char* off : {R"({"cmd": "cat", "stdin": "null"})", R"({"cmd": "cat", "stdin": null})", R"({"cmd": "cat"})"}) {
    auto s = sup::parse_request(off, "/");
    SBX_ASSERT_OK(s);
    EXPECT_FALSE(s->stdin_pipe) << off;
    EXPECT_FALSE(sup::spec_to_json(*s).contains("stdin")) << off;
  }
  for (const char* bad : {R"({"cmd": "cat", "stdin": "file"})", R"({"cmd": "cat", "stdin": 1})",
                          R"({"cmd": "cat", "stdin": "PIPE"})"}) {
    auto s = sup::parse_request(bad, "/");
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().code, Errc::invalid_argument);
    EXPECT_NE(s.error().message.find("'stdin'"), std::string::npos) << s.error().message;
  }
}

}  // namespace
