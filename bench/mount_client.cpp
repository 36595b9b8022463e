// bench_mount: the in-process figures of bench/run, against a mounted sbxfs,
// as Google Benchmark targets. Every target runs one operation per
// repetition (Iterations(1), manual time), so the JSON output holds one
// sample per repetition and bench/run reports median and min-max; with
// --benchmark_enable_random_interleaving=true the figure and its baseline
// alternate in time, which is fairer on a noisy machine.
//
//   bench_mount --mount=DIR --group=GROUP [--runs=N] [--tsp=PATH] [--nq=PATH]
//               [--stamp=PATH] [--delay-ms=MS] [--idle-ms=MS] [benchmark flags...]
//
// The peers (task-spooler's tsp, nq) run with the caller's environment:
// TS_SOCKET and NQDIR name their private queues.
//
// GROUP:
//   roundtrip  sbxfs_roundtrip: open/write/read/close on cmd ({"argv":["/bin/true"]}),
//              then open/read-to-EOF/close on procs/ID/wait;
//              posix_spawn_true: posix_spawn + waitpid of /bin/true;
//              tsp_true (with --tsp): posix_spawn + waitpid of `tsp -f true`;
//              nq_true (with --nq): `nq true` (it prints the job id and
//              returns), then `nq -w ID` (returns once the job has ended);
//              with --idle-ms=MS each run comes after MS of idleness (not
//              timed), as starts come at an agent's pace
//   shell      sbxfs_shell: bash -c 'exec 3<>cmd; echo true >&3; read id <&3;
//              exec 3>&-; cat procs/$id/wait'; bash_true: bash -c true
//   wake       sbxfs_wake / waitpid_wake: from bench_stamp's CLOCK_MONOTONIC
//              stamp (its last instruction) to the waiter's own clock when the
//              wait read (resp. waitpid) returns; tsp_wake / nq_wake (with
//              --tsp / --nq): the same command queued by the peer, to the
//              moment `tsp -w ID` / `nq -w ID`, waiting already, has returned
//   wake_busy  sbxfs_wake_idle / sbxfs_wake_busy: one waiter's wake-up (its
//              bench_stamp, ending 1 ms after a go the benchmark gives, to
//              its `wait` answer), alone, and while --busy=N (default 50)
//              commands that printed 1 MiB each end at the go, each with an
//              `output` read waiting for it; sbxfs_wake_busy_one: the same
//              N `output` reads all of one such command; sbxfs_wake_ends:
//              the N commands end at the go, nobody reads their output;
//              waitpid_wake_alone / waitpid_wake_ends: the same waiter and
//              N shells as children of the bench (no sbxfs), its waitpid
//              wake-up alone and among their ends
//   listing    status_json: open/read/close of status.json (status_json_all: of
//              status.json,all); ls_procs: `ls DIR/procs`
//              to /dev/null (after the first, from the kernel's copy);
//              ls_procs_changed: the same, each after a slot was made and
//              removed (untimed), so that the daemon lists anew;
//              readdir_procs: opendir/readdir/closedir in process;
//              ls_baseline (with --ls-baseline=DIR): `ls DIR` to /dev/null, e.g. the
//              state directory's procs/ (the same names in a plain directory)
//
// Utility modes (not benchmarks; one JSON line on stdout):
//   bench_mount --mount=DIR --fill=N [--par=P] --req=JSON   start N commands
//   bench_mount --mount=DIR --stop [--par=P] < ids             write procs/ID/stop
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/spawn_child.hpp"

extern char** environ;

namespace {

struct Config {
  std::string mount;
  std::string group;
  int runs = 100;
  std::string tsp;
  std::string nq;
  std::string stamp;
  int delay_ms = 10;
  int busy = 50;
  int idle_ms = 0;
  long fill = -1;
  int par = 4;
  std::string req;
  std::string ls_baseline;
  bool stop = false;
};
Config cfg;

int64_t mono_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

std::string read_fd(int fd, int* err = nullptr) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && err) *err = errno;
    break;
  }
  return out;
}

// open, read to EOF, close. Empty string and *err set on failure.
std::string slurp(const std::string& path, int* err = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (err) *err = errno;
    return {};
  }
  std::string s = read_fd(fd, err);
  ::close(fd);
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The documented start: write the request to cmd, read the bgId back from
// the same open file. Returns false with a reason in *why.
bool start(const std::string& req, std::string* id, std::string* why) {
  int fd = ::open((cfg.mount + "/cmd").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *why = std::string("open cmd: ") + std::strerror(errno);
    return false;
  }
  ssize_t w = ::write(fd, req.data(), req.size());
  if (w != ssize_t(req.size())) {
    int e = errno;
    char buf[512];
    ssize_t n = ::read(fd, buf, sizeof buf);
    *why = std::string("write cmd: ") + std::strerror(e) + (n > 0 ? ": " + trim(std::string(buf, size_t(n))) : "");
    ::close(fd);
    return false;
  }
  char buf[256];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) {
    *why = std::string("read cmd: ") + (n < 0 ? std::strerror(errno) : "EOF");
    return false;
  }
  *id = trim(std::string(buf, size_t(n)));
  if (id->rfind("error", 0) == 0) {
    *why = *id;
    return false;
  }
  return true;
}

// spawn_child + waitpid. Returns the wait status or -1.
int spawn_wait(const std::vector<std::string>& args, int out_fd = -1, bool search = false) {
  const pid_t pid = spawn_child(args, out_fd, search);
  if (pid < 0) return -1;
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

// ---- roundtrip -------------------------------------------------------------

// --idle-ms: nothing happens for that long before a run (state.PauseTiming
// would count its own cost; the runs are timed by hand anyway).
void idle_before_run() {
  if (cfg.idle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(cfg.idle_ms));
}

void BM_sbxfs_roundtrip(benchmark::State& state) {
  const std::string req = "{\"argv\": [\"/bin/true\"]}\n";
  for (auto _ : state) {
    idle_before_run();
    int64_t t0 = mono_ns();
    std::string id, why;
    if (!start(req, &id, &why)) {
      state.SkipWithError(why.c_str());
      break;
    }
    int err = 0;
    std::string ans = slurp(cfg.mount + "/procs/" + id + "/wait", &err);
    int64_t t1 = mono_ns();
    if (err || ans.find("\"stillRunning\": false") == std::string::npos) {
      state.SkipWithError(("wait: " + (err ? std::string(std::strerror(err)) : ans)).c_str());
      break;
    }
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
}

void BM_posix_spawn_true(benchmark::State& state) {
  for (auto _ : state) {
    idle_before_run();
    int64_t t0 = mono_ns();
    int st = spawn_wait({"/bin/true"});
    int64_t t1 = mono_ns();
    if (st != 0) {
      state.SkipWithError("posix_spawn /bin/true failed");
      break;
    }
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
}

void BM_tsp_true(benchmark::State& state) {
  for (auto _ : state) {
    int64_t t0 = mono_ns();
    int st = spawn_wait({cfg.tsp, "-f", "true"});
    int64_t t1 = mono_ns();
    if (st != 0) {
      state.SkipWithError("tsp -f true failed");
      break;
    }
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
}

// posix_spawn + waitpid with stdout captured; empty on failure.
std::string spawn_output(const std::vector<std::string>& args, int* status) {
  int p[2];
  *status = -1;
  if (pipe2(p, O_CLOEXEC) != 0) return {};
  int st = -1;
  std::string out;
  std::thread reader([&] { out = read_fd(p[0]); });
  st = spawn_wait(args, p[1]);
  ::close(p[1]);
  reader.join();
  ::close(p[0]);
  *status = st;
  return out;
}

void BM_nq_true(benchmark::State& state) {
  for (auto _ : state) {
    int64_t t0 = mono_ns();
    int st = -1;
    const std::string id = trim(spawn_output({cfg.nq, "true"}, &st));
    if (st != 0 || id.empty()) {
      state.SkipWithError("nq true failed");
      break;
    }
    st = spawn_wait({cfg.nq, "-w", id});
    int64_t t1 = mono_ns();
    if (st != 0) {
      state.SkipWithError("nq -w failed");
      break;
    }
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
}

// ---- shell -----------------------------------------------------------------

void BM_sbxfs_shell(benchmark::State& state) {
  const std::string snippet =
      "exec 3<>\"$1/cmd\"; echo true >&3; read -r id <&3; exec 3>&-; cat \"$1/procs/$id/wait\"";
  for (auto _ : state) {
    int64_t t0 = mono_ns();
    int st = spawn_wait({"/bin/bash", "-c", snippet, "bash", cfg.mount});
    int64_t t1 = mono_ns();
    if (st != 0) {
      state.SkipWithError("the shell round trip failed");
      break;
    }
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
}

void BM_bash_true(benchmark::State& state) {
  for (auto _ : state) {
    int64_t t0 = mono_ns();
    int st = spawn_wait({"/bin/bash", "-c", "true"});
    int64_t t1 = mono_ns();
    if (st != 0) {
      state.SkipWithError("bash -c true failed");
      break;
    }
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
}

// ---- wake_busy -------------------------------------------------------------

// The go: a FIFO in a directory of its own, both removed with it. Commands
// blocked opening it for reading all go on once it is opened for writing.
struct GoFifo {
  std::string dir, path;
  bool ok = false;
  GoFifo() {
    char tmpl[] = "/tmp/sbxbench-go-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir = tmpl;
    path = dir + "/go";
    ok = ::mkfifo(path.c_str(), 0600) == 0;
  }
  ~GoFifo() {
    if (dir.empty()) return;
    ::unlink(path.c_str());
    ::rmdir(dir.c_str());
  }
  GoFifo(const GoFifo&) = delete;
  GoFifo& operator=(const GoFifo&) = delete;
};

// Starts the waiter (and `sources` commands that print 1 MiB, then wait for
// the go), parks a `wait` read for the waiter and `busy` `output` reads
// spread over the others, then gives the go: the others end at once, the
// waiter a millisecond later, while the answers are under way. Returns the
// waiter's wake-up in ns (< 0: failed). The go is a FIFO opened for writing,
// so the moment is the benchmark's, however long the starts took. With one
// source the 50 answers come without 50 other ends (processes exiting,
// monitors reporting) on the same CPUs.
double wake_among(int busy, int sources, std::string* why) {
  const GoFifo fifo;
  if (!fifo.ok) {
    *why = "the go fifo could not be made";
    return -1;
  }
  const std::string& go = fifo.path;
  const std::string heavy = "{\"cmd\": \"head -c 1048576 /dev/zero | tr '\\\\000' a; exec " + cfg.stamp + " --go " +
                            go + " > /dev/null\"}\n";
  std::vector<std::string> ids;
  for (int i = 0; i < sources; ++i) {
    std::string id;
    if (!start(heavy, &id, why)) return -1;
    ids.push_back(id);
  }
  std::string waiter;
  if (!start("{\"argv\": [" + json_str(cfg.stamp) + ", \"--go\", " + json_str(go) + ", \"1000\"]}\n", &waiter, why))
    return -1;
  std::atomic<int> bad{0}, issued{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < busy; ++i)
    readers.emplace_back([&, id = ids[static_cast<std::size_t>(i) % ids.size()]] {
      int err = 0;
      ++issued;
      std::string ans = slurp(cfg.mount + "/procs/" + id + "/output", &err);
      if (err || ans.size() < (1u << 20)) ++bad;
    });
  int err = 0;
  std::string ans;
  std::atomic<int64_t> woke{0};
  std::thread wait_reader([&] {
    ++issued;
    ans = slurp(cfg.mount + "/procs/" + waiter + "/wait", &err);
    woke = mono_ns();
  });
  // Every command has printed its MiB (it is at the go, or nearly), every
  // read is issued, and has had time to reach the daemon and park.
  for (const std::string& id : ids) {
    struct stat st {};
    while (::stat((cfg.mount + "/procs/" + id + "/log").c_str(), &st) != 0 || st.st_size < (1 << 20))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  while (issued.load() < busy + 1) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // Blocks until the first command opens it; held open until the waiter is
  // answered, so that a command that comes to the go late is not stranded.
  const int go_fd = ::open(go.c_str(), O_WRONLY | O_CLOEXEC);
  wait_reader.join();
  if (go_fd >= 0) ::close(go_fd);
  for (std::thread& t : readers) t.join();
  if (go_fd < 0) {
    *why = "the go fifo could not be opened";
    return -1;
  }
  if (err || ans.find("\"stillRunning\": false") == std::string::npos) {
    *why = "wait failed";
    return -1;
  }
  if (bad) {
    *why = std::to_string(bad.load()) + " output reads failed";
    return -1;
  }
  const long long stamp = std::atoll(slurp(cfg.mount + "/procs/" + waiter + "/stdout").c_str());
  if (stamp <= 0) {
    *why = "no stamp in stdout";
    return -1;
  }
  return double(woke.load() - stamp);
}

// One run of `measure` (a wake-up in ns, < 0: failed, saying why) per repetition.
void run_wake(benchmark::State& state, const std::function<double(std::string*)>& measure) {
  for (auto _ : state) {
    std::string why;
    const double ns = measure(&why);
    if (ns < 0) {
      state.SkipWithError(why.c_str());
      return;
    }
    state.SetIterationTime(ns / 1e9);
  }
}

void run_wake_among(benchmark::State& state, int busy, int sources) {
  run_wake(state, [&](std::string* why) { return wake_among(busy, sources, why); });
}

// The machine's part of wake_ends, without sbxfs: `others` shells that
// print 1 MiB to /dev/null and exec `bench_stamp --go`, and the waiter
// `bench_stamp --go FIFO 1000`, all children of this process; the waiter's
// waitpid wake-up (ns, < 0: failed) while the others end at the go.
double waitpid_among_ends(int others, std::string* why) {
  const GoFifo fifo;
  if (!fifo.ok) {
    *why = "the go fifo could not be made";
    return -1;
  }
  const std::string& go = fifo.path;
  struct Kids {
    std::vector<pid_t> pids;
    ~Kids() {
      for (pid_t k : pids) ::kill(k, SIGKILL);
      for (pid_t k : pids) ::waitpid(k, nullptr, 0);
    }
  } kids;
  const std::string heavy = "head -c 1048576 /dev/zero | tr '\\000' a; exec " + cfg.stamp + " --go " + go;
  for (int i = 0; i < others; ++i) {
    const pid_t k = spawn_child({"/bin/sh", "-c", heavy});
    if (k < 0) {
      *why = "posix_spawn sh";
      return -1;
    }
    kids.pids.push_back(k);
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    *why = "pipe";
    return -1;
  }
  const pid_t waiter = spawn_child({cfg.stamp, "--go", go, "1000"}, p[1]);
  ::close(p[1]);
  if (waiter < 0) {
    ::close(p[0]);
    *why = "posix_spawn bench_stamp";
    return -1;
  }
  // Each shell has printed its MiB once it has become bench_stamp (exec'd).
  for (pid_t k : kids.pids) {
    const std::string cmdline = "/proc/" + std::to_string(k) + "/cmdline";
    while (slurp(cmdline).rfind(cfg.stamp, 0) != 0) {
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(k), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == k) {
        *why = "a shell ended before the go";
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const int go_fd = ::open(go.c_str(), O_WRONLY | O_CLOEXEC);
  int st = 0;
  while (waitpid(waiter, &st, 0) < 0 && errno == EINTR) {
  }
  const int64_t woke = mono_ns();
  if (go_fd >= 0) ::close(go_fd);
  const long long stamp = std::atoll(read_fd(p[0]).c_str());
  ::close(p[0]);
  if (stamp <= 0) {
    *why = "no stamp";
    return -1;
  }
  return double(woke - stamp);
}

void BM_waitpid_wake_ends(benchmark::State& state) {
  run_wake(state, [](std::string* why) { return waitpid_among_ends(cfg.busy, why); });
}
void BM_waitpid_wake_alone(benchmark::State& state) {
  run_wake(state, [](std::string* why) { return waitpid_among_ends(0, why); });
}

void BM_sbxfs_wake_idle(benchmark::State& state) { run_wake_among(state, 0, 0); }
void BM_sbxfs_wake_busy(benchmark::State& state) { run_wake_among(state, cfg.busy, cfg.busy); }
void BM_sbxfs_wake_busy_one(benchmark::State& state) { run_wake_among(state, cfg.busy, 1); }
void BM_sbxfs_wake_ends(benchmark::State& state) { run_wake_among(state, 0, cfg.busy); }

// ---- wake ------------------------------------------------------------------

void BM_sbxfs_wake(benchmark::State& state) {
  const std::string req =
      "{\"argv\": [" + json_str(cfg.stamp) + ", \"" + std::to_string(cfg.delay_ms) + "\"]}\n";
  long late = 0;
  for (auto _ : state) {
    bool done = false;
    for (int attempt = 0; attempt < 5 && !done; ++attempt) {
      std::string id, why;
      if (!start(req, &id, &why)) {
        state.SkipWithError(why.c_str());
        return;
      }
      int fd = ::open((cfg.mount + "/procs/" + id + "/wait").c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        state.SkipWithError("open wait");
        return;
      }
      int64_t issued = mono_ns();
      int err = 0;
      std::string ans = read_fd(fd, &err);
      int64_t t1 = mono_ns();
      ::close(fd);
      if (err || ans.find("\"stillRunning\": false") == std::string::npos) {
        state.SkipWithError("wait failed");
        return;
      }
      long long stamp = std::atoll(slurp(cfg.mount + "/procs/" + id + "/stdout").c_str());
      if (stamp <= 0) {
        state.SkipWithError("no stamp in stdout");
        return;
      }
      if (stamp < issued) {  // ended before the read was issued: not a wake-up
        ++late;
        continue;
      }
      state.SetIterationTime(double(t1 - stamp) / 1e9);
      done = true;
    }
    if (!done) {
      state.SkipWithError("the command always ended before the wait read was issued; raise --delay-ms");
      return;
    }
  }
  state.counters["late"] = double(late);
}

void BM_waitpid_wake(benchmark::State& state) {
  for (auto _ : state) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      state.SkipWithError("pipe");
      break;
    }
    std::vector<std::string> args = {cfg.stamp, std::to_string(cfg.delay_ms)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ::close(p[1]);
    if (rc != 0) {
      ::close(p[0]);
      state.SkipWithError("posix_spawn bench_stamp");
      break;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    int64_t t1 = mono_ns();
    long long stamp = std::atoll(read_fd(p[0]).c_str());
    ::close(p[0]);
    if (stamp <= 0) {
      state.SkipWithError("no stamp");
      break;
    }
    state.SetIterationTime(double(t1 - stamp) / 1e9);
  }
}

// A peer's wake-up: `queue` starts bench_stamp DELAY as a job and prints its
// id; `wait` (given the id) blocks until it has ended; `stamp_of` finds the
// stamp in the job's output once it has.
void peer_wake(benchmark::State& state, const std::vector<std::string>& queue,
               const std::function<std::vector<std::string>(const std::string&)>& wait,
               const std::function<std::string(const std::string&)>& output_of) {
  // The stamp is the output's last line of digits (nq may add its own
  // "[exited with status 0.]" after it).
  auto stamp_in = [](const std::string& out) {
    long long stamp = 0;
    std::size_t at = 0;
    while (at < out.size()) {
      std::size_t nl = out.find('\n', at);
      if (nl == std::string::npos) nl = out.size();
      const std::string line = out.substr(at, nl - at);
      if (!line.empty() && line.find_first_not_of("0123456789") == std::string::npos) stamp = std::atoll(line.c_str());
      at = nl + 1;
    }
    return stamp;
  };
  for (auto _ : state) {
    bool done = false;
    for (int attempt = 0; attempt < 5 && !done; ++attempt) {
      std::vector<std::string> q = queue;
      q.push_back(cfg.stamp);
      q.push_back(std::to_string(cfg.delay_ms));
      int st = -1;
      const std::string id = trim(spawn_output(q, &st));
      if (st != 0 || id.empty()) {
        state.SkipWithError("queueing the job failed");
        return;
      }
      st = spawn_wait(wait(id));
      int64_t t1 = mono_ns();
      if (st != 0) {
        state.SkipWithError("waiting for the job failed");
        return;
      }
      long long stamp = stamp_in(output_of(id));
      if (stamp <= 0) {
        // nq's wait returns at once when it comes before the job has taken
        // its lock: no wake-up; wait for the end for real, and measure again.
        for (int i = 0; i < 100 && stamp <= 0; ++i) {
          spawn_wait(wait(id));
          stamp = stamp_in(output_of(id));
          if (stamp <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        if (stamp <= 0) {
          state.SkipWithError("no stamp in the job's output");
          return;
        }
        continue;
      }
      state.SetIterationTime(double(t1 - stamp) / 1e9);
      done = true;
    }
    if (!done) {
      state.SkipWithError("the wait always returned before the job had begun");
      return;
    }
  }
}

void BM_tsp_wake(benchmark::State& state) {
  peer_wake(
      state, {cfg.tsp}, [](const std::string& id) { return std::vector<std::string>{cfg.tsp, "-w", id}; },
      [](const std::string& id) {
        int st = -1;
        return slurp(trim(spawn_output({cfg.tsp, "-o", id}, &st)));
      });
}

void BM_nq_wake(benchmark::State& state) {
  peer_wake(
      state, {cfg.nq}, [](const std::string& id) { return std::vector<std::string>{cfg.nq, "-w", id}; },
      [](const std::string& id) {
        const char* dir = std::getenv("NQDIR");
        return slurp((dir ? std::string(dir) + "/" : std::string()) + id);
      });
}

// ---- listing ---------------------------------------------------------------

/// open/read/close of MNT/NAME, timed; its size is the counter `bytes`.
/// Read as `cat` reads, into one buffer of 128 KiB: a growing copy of a
/// file of megabytes would time the client's own page faults.
void read_timed(benchmark::State& state, const std::string& name) {
  static std::vector<char> buf(128 * 1024);
  size_t bytes = 0;
  for (auto _ : state) {
    int64_t t0 = mono_ns();
    int err = 0;
    size_t got = 0;
    const int fd = ::open((cfg.mount + "/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) err = errno;
    for (ssize_t n; fd >= 0 && (n = ::read(fd, buf.data(), buf.size())) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = errno;
        break;
      }
      got += size_t(n);
    }
    if (fd >= 0) ::close(fd);
    int64_t t1 = mono_ns();
    if (err || got == 0) {
      state.SkipWithError(("read " + name).c_str());
      break;
    }
    bytes = got;
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
  state.counters["bytes"] = double(bytes);
}

void BM_status_json(benchmark::State& state) { read_timed(state, "status.json"); }

// status.json,all: every command, ended ones too.
void BM_status_json_all(benchmark::State& state) { read_timed(state, "status.json,all"); }

// `ls DIR` to /dev/null, timed; `before` (untimed, may be empty) runs ahead
// of each and says whether it worked.
void ls_timed(benchmark::State& state, const std::string& dir, const std::function<bool()>& before = {}) {
  for (auto _ : state) {
    if (before && !before()) {
      state.SkipWithError("the step before ls failed");
      break;
    }
    int64_t t0 = mono_ns();
    int st = spawn_wait({"/bin/ls", dir});
    int64_t t1 = mono_ns();
    if (st != 0) {
      state.SkipWithError(("ls " + dir + " failed").c_str());
      break;
    }
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
}

void BM_ls_procs(benchmark::State& state) { ls_timed(state, cfg.mount + "/procs"); }

// A slot made and removed: the kernel's copy of the listing is stale.
void BM_ls_procs_changed(benchmark::State& state) {
  const std::string slot = cfg.mount + "/procs/bench-ls-slot";
  ls_timed(state, cfg.mount + "/procs", [&] { return ::mkdir(slot.c_str(), 0755) == 0 && ::rmdir(slot.c_str()) == 0; });
}

void BM_ls_baseline(benchmark::State& state) { ls_timed(state, cfg.ls_baseline); }

void BM_readdir_procs(benchmark::State& state) {
  long entries = 0;
  for (auto _ : state) {
    int64_t t0 = mono_ns();
    DIR* d = opendir((cfg.mount + "/procs").c_str());
    if (!d) {
      state.SkipWithError("opendir procs");
      break;
    }
    long n = 0;
    while (readdir(d)) ++n;
    closedir(d);
    int64_t t1 = mono_ns();
    entries = n;
    state.SetIterationTime(double(t1 - t0) / 1e9);
  }
  state.counters["entries"] = double(entries);
}

// ---- utility modes ---------------------------------------------------------

int fill() {
  std::atomic<long> next{0}, ok{0}, errors{0};
  std::mutex mu;
  std::string first_error;
  const std::string req = cfg.req.empty() || cfg.req.back() != '\n' ? cfg.req + "\n" : cfg.req;
  int64_t t0 = mono_ns();
  std::vector<std::thread> ts;
  for (int t = 0; t < cfg.par; ++t)
    ts.emplace_back([&] {
      while (next.fetch_add(1) < cfg.fill) {
        std::string id, why;
        bool done = false;
        for (int attempt = 0; attempt < 20 && !done; ++attempt) {
          done = start(req, &id, &why);
          if (!done && why.find("EAGAIN") != std::string::npos) {
            usleep(10000);
            continue;
          }
          break;
        }
        if (done) {
          ++ok;
        } else {
          ++errors;
          std::lock_guard g(mu);
          if (first_error.empty()) first_error = why;
        }
      }
    });
  for (auto& t : ts) t.join();
  double secs = double(mono_ns() - t0) / 1e9;
  std::printf("{\"started\": %ld, \"errors\": %ld, \"seconds\": %.6f, \"firstError\": %s}\n", ok.load(),
              errors.load(), secs, json_str(first_error).c_str());
  return errors.load() ? 1 : 0;
}

int stop_all() {
  std::vector<std::string> ids;
  for (std::string line; std::getline(std::cin, line);)
    if (!trim(line).empty()) ids.push_back(trim(line));
  std::atomic<size_t> next{0};
  std::atomic<long> ok{0}, errors{0};
  int64_t t0 = mono_ns();
  std::vector<std::thread> ts;
  for (int t = 0; t < cfg.par; ++t)
    ts.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < ids.size();) {
        int fd = ::open((cfg.mount + "/procs/" + ids[i] + "/stop").c_str(), O_WRONLY | O_CLOEXEC);
        bool good = fd >= 0 && ::write(fd, "\n", 1) == 1;
        if (fd >= 0) good = ::close(fd) == 0 && good;
        (good ? ok : errors)++;
      }
    });
  for (auto& t : ts) t.join();
  std::printf("{\"stopped\": %ld, \"errors\": %ld, \"seconds\": %.6f}\n", ok.load(), errors.load(),
              double(mono_ns() - t0) / 1e9);
  return errors.load() ? 1 : 0;
}

benchmark::internal::Benchmark* reg(const char* name, void (*fn)(benchmark::State&)) {
  return benchmark::RegisterBenchmark(name, fn)
      ->Iterations(1)
      ->Repetitions(cfg.runs)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

bool take(const char* arg, const char* key, std::string* out) {
  size_t n = std::strlen(key);
  if (std::strncmp(arg, key, n) != 0 || arg[n] != '=') return false;
  *out = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string v;
    const char* a = argv[i];
    if (take(a, "--mount", &cfg.mount) || take(a, "--group", &cfg.group) || take(a, "--tsp", &cfg.tsp) || take(a, "--nq", &cfg.nq) ||
        take(a, "--stamp", &cfg.stamp) || take(a, "--req", &cfg.req) || take(a, "--ls-baseline", &cfg.ls_baseline))
      continue;
    if (take(a, "--runs", &v)) cfg.runs = std::atoi(v.c_str());
    else if (take(a, "--delay-ms", &v)) cfg.delay_ms = std::atoi(v.c_str());
    else if (take(a, "--idle-ms", &v)) cfg.idle_ms = std::max(0, std::atoi(v.c_str()));
    else if (take(a, "--busy", &v)) cfg.busy = std::max(1, std::atoi(v.c_str()));
    else if (take(a, "--fill", &v)) cfg.fill = std::atol(v.c_str());
    else if (take(a, "--par", &v)) cfg.par = std::max(1, std::atoi(v.c_str()));
    else if (std::strcmp(a, "--stop") == 0) cfg.stop = true;
    else rest.push_back(argv[i]);
  }
  if (cfg.mount.empty()) {
    std::fprintf(stderr, "bench_mount: --mount=DIR is required (see the comment at the top of mount_client.cpp)\n");
    return 2;
  }
  if (cfg.fill >= 0) return fill();
  if (cfg.stop) return stop_all();

  if (cfg.group == "roundtrip") {
    reg("sbxfs_roundtrip", BM_sbxfs_roundtrip);
    reg("posix_spawn_true", BM_posix_spawn_true);
    if (!cfg.tsp.empty()) reg("tsp_true", BM_tsp_true);
    if (!cfg.nq.empty()) reg("nq_true", BM_nq_true);
  } else if (cfg.group == "shell") {
    reg("sbxfs_shell", BM_sbxfs_shell);
    reg("bash_true", BM_bash_true);
  } else if (cfg.group == "wake" || cfg.group == "wake_busy") {
    if (cfg.stamp.empty()) {
      std::fprintf(stderr, "bench_mount: --group=%s needs --stamp=PATH (bench_stamp)\n", cfg.group.c_str());
      return 2;
    }
    if (cfg.group == "wake") {
      reg("sbxfs_wake", BM_sbxfs_wake);
      reg("waitpid_wake", BM_waitpid_wake);
      if (!cfg.tsp.empty()) reg("tsp_wake", BM_tsp_wake);
      if (!cfg.nq.empty()) reg("nq_wake", BM_nq_wake);
    } else {
      reg("sbxfs_wake_idle", BM_sbxfs_wake_idle);
      reg("sbxfs_wake_busy", BM_sbxfs_wake_busy);
      reg("sbxfs_wake_busy_one", BM_sbxfs_wake_busy_one);
      reg("sbxfs_wake_ends", BM_sbxfs_wake_ends);
      reg("waitpid_wake_alone", BM_waitpid_wake_alone);
      reg("waitpid_wake_ends", BM_waitpid_wake_ends);
    }
  } else if (cfg.group == "listing") {
    reg("status_json", BM_status_json);
    reg("status_json_all", BM_status_json_all);
    reg("ls_procs", BM_ls_procs);
    reg("ls_procs_changed", BM_ls_procs_changed);
    reg("readdir_procs", BM_readdir_procs);
    if (!cfg.ls_baseline.empty()) reg("ls_baseline", BM_ls_baseline);
  } else {
    std::fprintf(stderr, "bench_mount: --group=roundtrip|shell|wake|wake_busy|listing\n");
    return 2;
  }
  int n = int(rest.size());
  rest.push_back(nullptr);
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
