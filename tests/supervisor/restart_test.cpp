// Records outlive the supervisor: a new Supervisor on the same state
// directory takes back running commands, reads the exit status of those that
// ended meanwhile, marks lost ones "unknown", and survives corrupt files.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "supervisor/clock.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;

// Reads one line from fd, or gives up at the deadline.
std::optional<std::string> read_line(int fd, std::chrono::milliseconds timeout) {
  std::string line;
  const auto deadline = Clock::now() + timeout;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    char buf[256];
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::nullopt;
    line.append(buf, static_cast<size_t>(got));
  }
  return line.substr(0, line.find('\n'));
}

// This one forks before any Supervisor exists in the test process.
class RestartTest : public SupervisorTest {
 protected:
  bool open_in_setup() const override { return false; }
};

TEST_F(RestartTest, RunningAndEndedSurviveSupervisorKill) {
  const std::string flag = work_ / "let-short-end";
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: a supervisor that gets SIGKILLed. Only _exit from here.
    ::close(p[0]);
    auto say = [&](const std::string& s) { (void)!::write(p[1], s.data(), s.size()); };
    try {
      auto opened = open_supervisor();
      if (!opened.ok()) {
        say("err open: " + opened.error().message + "\n");
        ::_exit(1);
      }
      auto& s = *opened.value();
      auto a = s.start(argv({"/bin/sleep", "30"}, "long"));
      auto b = s.start(shell("until [ -e '" + flag + "' ]; do sleep 0.02; done; exit 7", "short"));
      if (!a.ok() || !b.ok()) {
        say("err start: " + (a.ok() ? b.error().message : a.error().message) + "\n");
        ::_exit(1);
      }
      say("ready " + std::to_string(a->pid) + "\n");
      for (;;) ::pause();
    } catch (...) {
      say("err exception\n");
    }
    ::_exit(1);
  }
  forked_.push_back(child);
  ::close(p[1]);
  auto line = read_line(p[0], 15000ms);
  ::close(p[0]);
  ASSERT_TRUE(line) << "the child supervisor did not report";
  ASSERT_EQ(line->rfind("ready ", 0), 0u) << *line;
  const pid_t long_pid = static_cast<pid_t>(std::stol(line->substr(6)));

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  forked_.clear();
  ASSERT_TRUE(WIFSIGNALED(wstatus));

  // Its commands and their monitors live on.
  EXPECT_TRUE(process_alive(long_pid));
  auto mon = read_json(record_dir("long") + "/monitor.json");
  ASSERT_TRUE(mon) << read_file(record_dir("long") + "/monitor.json");
  EXPECT_TRUE(process_alive((*mon)["monitorPid"].get<pid_t>())) << "the monitor died with its supervisor";

  // "short" ends while no supervisor runs.
  write_file(flag, "");
  ASSERT_TRUE(wait_until([&] { return file_exists(record_dir("short") + "/exit.json"); }, 5000ms))
      << "short's monitor wrote no exit.json";

  auto opened = open_supervisor();
  SBX_ASSERT_OK(opened);
  sup_ = std::move(opened.value());

  auto l = sup_->status("long");
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->running);
  EXPECT_EQ(l->state, "running");
  EXPECT_EQ(l->pid, long_pid);

  auto s = sup_->status("short");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->running);
  EXPECT_EQ(s->state, "exited");
  EXPECT_EQ(s->exit_code, 7);
  EXPECT_EQ(s->end_reason, "exited");

  EXPECT_EQ(ids_of(sup_->list()), (std::vector<std::string>{"long", "short"}));

  const auto t0 = Clock::now();
  auto st = sup_->stop_and_wait("long", 10000ms);
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->running) << "a taken-back command could not be stopped";
  EXPECT_EQ(st->end_reason, "stopped");
  EXPECT_LT(seconds_since(t0), 4.0);
  EXPECT_FALSE(process_alive(long_pid));
  EXPECT_TRUE(wait_until([&] { return marked().empty(); }, 5000ms)) << pids_to_string(marked());
}

using RecoveryTest = SupervisorTest;

TEST_F(RecoveryTest, TakenBackCommandEndsOnItsOwn) {
  const std::string flag = work_ / "go";
  auto r = sup_->start(shell("until [ -e '" + flag + "' ]; do sleep 0.02; done; exit 3", "later"));
  SBX_ASSERT_OK(r);
  reopen();
  ASSERT_TRUE(sup_);
  auto st = sup_->status("later");
  ASSERT_TRUE(st);
  EXPECT_TRUE(st->running);
  write_file(flag, "");
  auto end = wait_ended("later", 5000ms);
  ASSERT_TRUE(end);
  EXPECT_EQ(end->exit_code, 3);
  EXPECT_EQ(end->end_reason, "exited");
}

TEST_F(RecoveryTest, MonitorGoneWithoutExitJsonIsUnknown) {
  auto r = sup_->start(argv({"/bin/sleep", "30"}, "orphan"));
  SBX_ASSERT_OK(r);
  auto ok = sup_->start(argv({"/bin/sleep", "30"}, "fine"));
  SBX_ASSERT_OK(ok);
  auto mj = read_json(record_dir("orphan") + "/monitor.json");
  ASSERT_TRUE(mj);
  const pid_t mon = (*mj)["monitorPid"].get<pid_t>();
  const pid_t pid = (*mj)["pid"].get<pid_t>();
  EXPECT_EQ(pid, r->pid);
  sup_.reset();

  // The monitor first, so that nobody writes an exit.json; then wait until
  // it has been reaped (its parent is init here), so it is really gone.
  ASSERT_EQ(::kill(mon, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return !file_exists("/proc/" + std::to_string(mon)); }, 10000ms, 20ms))
      << "the killed monitor was not reaped";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return !process_alive(pid); }, 5000ms));
  ASSERT_FALSE(file_exists(record_dir("orphan") + "/exit.json"));

  reopen();
  ASSERT_TRUE(sup_);
  auto st = sup_->status("orphan");
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->running);
  EXPECT_EQ(st->state, "exited");
  EXPECT_EQ(st->exit_code, -1);
  EXPECT_EQ(st->end_reason, "unknown");
  EXPECT_FALSE(st->finished_at.empty());
  auto ex = read_json(record_dir("orphan") + "/exit.json");
  ASSERT_TRUE(ex) << "the supervisor did not write exit.json";
  EXPECT_EQ(ex->value("endReason", ""), "unknown");
  EXPECT_EQ(ex->value("exitCode", 0), -1);
  // The other one is untouched.
  auto f = sup_->status("fine");
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->running);
  auto stopped = sup_->stop_and_wait("fine", 10000ms);
  ASSERT_TRUE(stopped);
  EXPECT_FALSE(stopped->running);
}

// The same with a dead monitor that nobody has reaped yet (a zombie: its
// /proc/PID/stat, start time included, is still there). To hold it in that
// state the test process becomes the subreaper the monitor is re-parented to.
TEST_F(RecoveryTest, ZombieMonitorCountsAsGone) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  struct Reaper {
    std::string marker;
    ~Reaper() {
      ::prctl(PR_SET_CHILD_SUBREAPER, 0);
      kill_marked(marker);
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
    }
  } reaper{marker_entry()};

  auto r = sup_->start(argv({"/bin/sleep", "30"}, "orphan"));
  SBX_ASSERT_OK(r);
  auto mj = read_json(record_dir("orphan") + "/monitor.json");
  ASSERT_TRUE(mj);
  const pid_t mon = (*mj)["monitorPid"].get<pid_t>();
  const pid_t pid = (*mj)["pid"].get<pid_t>();
  // The monitor server's child until the server ends with the supervisor.
  sup_.reset();
  auto f = proc_stat_fields(mon);
  ASSERT_GE(f.size(), 2u);
  if (std::stol(f[1]) != ::getpid()) GTEST_SKIP() << "the monitor was not re-parented to the test process";

  ASSERT_EQ(::kill(mon, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { auto g = proc_stat_fields(mon); return !g.empty() && g[0] == "Z"; }, 5000ms));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return !process_alive(pid); }, 5000ms));
  ASSERT_FALSE(file_exists(record_dir("orphan") + "/exit.json"));

  reopen();
  ASSERT_TRUE(sup_);
  auto st = sup_->status("orphan");
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->running) << "a zombie monitor is taken for a live one";
  EXPECT_EQ(st->exit_code, -1);
  EXPECT_EQ(st->end_reason, "unknown");
  // However it got there, it must end up "unknown" soon.
  auto later = sup_->wait("orphan", 2000ms);
  ASSERT_TRUE(later);
  EXPECT_FALSE(later->running);
  EXPECT_EQ(later->end_reason, "unknown");
}

TEST_F(RecoveryTest, CorruptRecordsAreErrorsOthersLoad) {
  const std::vector<std::pair<std::string, int>> ended = {
      {"good", 1}, {"badspec", 2}, {"emptyspec", 3}, {"badexit", 4}, {"emptyexit", 5}};
  for (const auto& [name, code] : ended) {
    auto r = sup_->start(shell("exit " + std::to_string(code), name));
    SBX_ASSERT_OK(r);
  }
  auto live = sup_->start(argv({"/bin/sleep", "30"}, "live"));
  SBX_ASSERT_OK(live);
  for (const auto& e : ended) ASSERT_TRUE(wait_ended(e.first));
  sup_.reset();

  const std::string spec = read_file(record_dir("badspec") + "/spec.json");
  ASSERT_GT(spec.size(), 10u);
  write_file(record_dir("badspec") + "/spec.json", spec.substr(0, spec.size() / 2));
  write_file(record_dir("emptyspec") + "/spec.json", "");
  write_file(record_dir("badexit") + "/exit.json", "{\"exitCode\": 4, \"endRea");
  write_file(record_dir("emptyexit") + "/exit.json", "");

  reopen();
  ASSERT_TRUE(sup_);
  EXPECT_EQ(ids_of(sup_->list()),
            (std::vector<std::string>{"badexit", "badspec", "emptyexit", "emptyspec", "good", "live"}));
  for (const char* name : {"badspec", "emptyspec", "badexit", "emptyexit"}) {
    auto st = sup_->status(name);
    ASSERT_TRUE(st) << name;
    EXPECT_EQ(st->state, "error") << name;
    EXPECT_FALSE(st->running) << name;
    ASSERT_TRUE(st->error.has_value()) << name;
    EXPECT_FALSE(st->error->message.empty()) << name;
    auto j = st->to_json();
    EXPECT_EQ(j.value("state", ""), "error") << name;
    EXPECT_TRUE(j.contains("error")) << name << ": " << j.dump();
  }
  auto good = sup_->status("good");
  ASSERT_TRUE(good);
  EXPECT_EQ(good->state, "exited");
  EXPECT_EQ(good->exit_code, 1);
  EXPECT_FALSE(good->error.has_value());

  auto l = sup_->status("live");
  ASSERT_TRUE(l);
  EXPECT_TRUE(l->running);
  auto st = sup_->stop_and_wait("live", 10000ms);
  ASSERT_TRUE(st);
  EXPECT_FALSE(st->running);
  EXPECT_EQ(st->end_reason, "stopped");
}

TEST_F(RecoveryTest, UnfinishedStartFolderIsRemoved) {
  sup_.reset();
  const std::string junk = procs_dir() + "/.new-junk";
  fs::create_directories(junk);
  write_file(junk + "/spec.json", "{\"bgId\": \"junk\"}");
  reopen();
  ASSERT_TRUE(sup_);
  EXPECT_FALSE(file_exists(junk));
  EXPECT_TRUE(sup_->list().empty());
  EXPECT_FALSE(sup_->status("junk").has_value());
}

TEST_F(RecoveryTest, UnfinishedStagingIsRemovedAndNothingIsStagedInProcs) {
  auto r = sup_->start(argv({"/bin/true"}));
  SBX_ASSERT_OK(r);
  ASSERT_TRUE(wait_ended(r->bg_id));
  SBX_ASSERT_OK(sup_->remove(r->bg_id));
  for (const auto& e : fs::directory_iterator(procs_dir()))
    EXPECT_NE(e.path().filename().string()[0], '.') << e.path();
  sup_.reset();
  fs::create_directories(state_dir() + "/staging/new-junk");
  write_file(state_dir() + "/staging/new-junk/spec.json", "{\"bgId\": \"junk\"}");
  fs::create_directories(state_dir() + "/staging/del-7");
  fs::create_directories(state_dir() + "/staging/spare-999");  // an unused spare folder
  reopen();
  ASSERT_TRUE(sup_);
  EXPECT_FALSE(file_exists(state_dir() + "/staging/new-junk"));
  EXPECT_FALSE(file_exists(state_dir() + "/staging/del-7"));
  EXPECT_FALSE(file_exists(state_dir() + "/staging/spare-999"));
  EXPECT_FALSE(sup_->status("junk").has_value());
}

// The daemon died between the fork and the rename into procs/: the command
// runs, so its record is kept (from staging/, or from an older build's procs/.new-ID).
TEST_F(RecoveryTest, ForkedStartInStagingIsKept) {
  for (const std::string& staged : {std::string("/staging/new-"), std::string("/procs/.new-")}) {
    SCOPED_TRACE(staged);
    auto r = sup_->start(shell("sleep 30", "forked"));
    SBX_ASSERT_OK(r);
    sup_.reset();
    fs::rename(record_dir("forked"), state_dir() + staged + "forked");
    reopen();
    ASSERT_TRUE(sup_);
    auto st = sup_->status("forked");
    ASSERT_TRUE(st.has_value());
    EXPECT_TRUE(st->running);
    EXPECT_TRUE(file_exists(record_dir("forked") + "/monitor.json"));
    auto stopped = sup_->stop_and_wait("forked", 10000ms);
    ASSERT_TRUE(stopped);
    EXPECT_FALSE(stopped->running);
    SBX_ASSERT_OK(sup_->remove("forked"));
  }
}

// An older build staged starts and removals in procs/ under names a user
// could also give; its records of such names must load, not vanish.
TEST_F(RecoveryTest, OlderBuildsDotNamedRecordsLoad) {
  sup_.reset();
  for (const std::string name : {".new-x", ".del-x.1"}) {
    const std::string dir = procs_dir() + "/" + name;
    fs::create_directories(dir);
    write_file(dir + "/spec.json", "{\"bgId\": \"" + name + "\", \"argv\": [\"/bin/true\"], \"cwd\": \"/\"}");
    write_file(dir + "/exit.json", "{\"exitCode\": 0, \"signal\": null, \"endReason\": \"exited\", "
                                   "\"timedOut\": false, \"finishedAt\": \"" + sup::iso_now() + "\"}");
    write_file(dir + "/log", "kept\n");
  }
  fs::create_directories(procs_dir() + "/.new-slot");
  write_file(procs_dir() + "/.new-slot/slot", "{\"ownerUid\": 0, \"ownerSid\": 0}");
  reopen();
  ASSERT_TRUE(sup_);
  for (const std::string name : {".new-x", ".del-x.1"}) {
    auto st = sup_->status(name);
    ASSERT_TRUE(st.has_value()) << name;
    EXPECT_EQ(st->exit_code, 0) << name;
    EXPECT_EQ(read_file(procs_dir() + "/" + name + "/log"), "kept\n");
  }
  EXPECT_TRUE(sup_->status(".new-slot").has_value());
  SBX_EXPECT_OK(sup_->remove(".del-x.1"));
  EXPECT_FALSE(file_exists(procs_dir() + "/.del-x.1"));
}

TEST_F(RecoveryTest, AutoIdsAreNotReusedAfterRestart) {
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto r = sup_->start(argv({"/bin/true"}));
    SBX_ASSERT_OK(r);
    ids.push_back(r->bg_id);
    ASSERT_TRUE(wait_ended(r->bg_id));
  }
  sup_.reset();
  std::error_code ec;
  fs::remove(state_dir() + "/counter", ec);  // a lost hint
  reopen();
  ASSERT_TRUE(sup_);
  auto r = sup_->start(argv({"/bin/true"}));
  SBX_ASSERT_OK(r);
  EXPECT_GT(r->bg_id, ids.back());
  EXPECT_EQ(ids_of(sup_->list()).back(), r->bg_id);
  ASSERT_TRUE(wait_ended(r->bg_id));
}

TEST_F(RecoveryTest, ANameThatLooksLikeAnAutoIdDoesNotMoveThemAfterRestart) {
  auto named = argv({"/bin/true"});
  named.name = "9999";
  auto n = sup_->start(named);
  SBX_ASSERT_OK(n);
  ASSERT_TRUE(wait_ended("9999"));
  auto a = sup_->start(argv({"/bin/true"}));
  SBX_ASSERT_OK(a);
  ASSERT_TRUE(wait_ended(a->bg_id));
  sup_.reset();
  reopen();
  ASSERT_TRUE(sup_);
  auto b = sup_->start(argv({"/bin/true"}));
  SBX_ASSERT_OK(b);
  EXPECT_GT(b->bg_id, a->bg_id);
  EXPECT_EQ(b->bg_id.size(), 4u) << b->bg_id << ": the next id after " << a->bg_id;
  ASSERT_TRUE(wait_ended(b->bg_id));
}

// ~Supervisor while commands end: the event thread must not run callbacks
// into a half-destroyed supervisor; the next one finds them all ended.
// The monitors are SIGKILLed at varying moments around the destruction
// (the supervisor then writes exit.json itself, on its event thread).
TEST_F(RecoveryTest, DestroyWhileCommandsEnd) {
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) {
    auto r = sup_->start(argv({"/bin/sleep", "30"}));
    SBX_ASSERT_OK(r);
    ids.push_back(r->bg_id);
    auto mj = read_json(record_dir(r->bg_id) + "/monitor.json");
    ASSERT_TRUE(mj);
    const pid_t mon = (*mj)["monitorPid"].get<pid_t>();
    std::thread killer([mon, pid = r->pid, delay = std::chrono::microseconds(100 * i)] {
      std::this_thread::sleep_for(delay);
      ::kill(mon, SIGKILL);
      ::kill(pid, SIGKILL);
    });
    sup_.reset();
    killer.join();
    ASSERT_TRUE(wait_until([&] { return !process_alive(mon); }, 5000ms, 1ms));
    reopen();
    ASSERT_TRUE(sup_);
  }
  for (const auto& id : ids) {
    auto st = wait_ended(id, 5000ms);
    ASSERT_TRUE(st) << id;
    EXPECT_EQ(st->exit_code, -1) << id;
  }
}

TEST_F(RecoveryTest, EmptySlotSurvivesRestart) {
  SBX_ASSERT_OK(sup_->create_slot("slot", ::getuid(), ::getsid(0)));
  reopen();
  ASSERT_TRUE(sup_);
  auto st = sup_->status("slot");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->state, "empty");
  EXPECT_TRUE(st->named);
}

}  // namespace
