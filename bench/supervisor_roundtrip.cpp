// Round trip of `/bin/true` through the supervisor library (start -> ended
// event observed), beside a plain posix_spawn + waitpid in the same run, and
// the memory of an idle monitor. Prints medians with min-max and the ratio.
//
//   build/bin/bench_supervisor [RUNS]      (default 200)
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "supervisor/supervisor.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median, min, max;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::vector<double> plain_spawn(int runs) {
  std::vector<double> out;
  char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    pid_t pid;
    if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ) != 0) continue;
    int st;
    waitpid(pid, &st, 0);
    out.push_back(ms_since(t0));
  }
  return out;
}

long smaps_kb(pid_t pid, const char* key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/smaps_rollup");
  const std::string want = std::string(key) + ":";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(want, 0) == 0) return std::atol(line.c_str() + want.size());
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  auto dir = std::filesystem::temp_directory_path() / ("sbx-bench-" + std::to_string(::getpid()));
  sup::SupervisorOptions o;
  o.state_dir = dir.string();
  auto opened = sup::Supervisor::open(o);
  if (!opened) {
    std::fprintf(stderr, "open: %s\n", opened.error().message.c_str());
    return 1;
  }
  auto& s = *opened.value();

  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> ended;
  s.subscribe([&](const sup::Event& e) {
    if (e.kind != sup::Event::Kind::ended) return;
    std::lock_guard g(mu);
    ended.insert(e.bg_id);
    cv.notify_all();
  });

  sup::StartSpec spec;
  spec.argv = {"/bin/true"};
  spec.cwd = "/";
  std::vector<double> lib;
  for (int i = 0; i < runs; ++i) {
    auto t0 = Clock::now();
    auto r = s.start(spec);
    if (!r) {
      std::fprintf(stderr, "start: %s\n", r.error().message.c_str());
      return 1;
    }
    std::unique_lock g(mu);
    cv.wait(g, [&] { return ended.count(r->bg_id) > 0; });
    lib.push_back(ms_since(t0));
  }
  auto base = plain_spawn(runs);

  auto L = stats(lib), B = stats(base);
  std::printf("%-44s %10s %18s %8s\n", "figure", "median", "min-max", "");
  std::printf("%-44s %8.3fms %8.3f-%8.3f\n", "supervisor start -> ended event, /bin/true", L.median, L.min, L.max);
  std::printf("%-44s %8.3fms %8.3f-%8.3f\n", "baseline posix_spawn + waitpid, /bin/true", B.median, B.min, B.max);
  std::printf("%-44s %9.1fx\n", "ratio (medians)", L.median / B.median);

  // An idle monitor's memory.
  sup::StartSpec sleeper;
  sleeper.argv = {"sleep", "30"};
  sleeper.cwd = "/";
  auto r = s.start(sleeper);
  if (r) {
    std::ifstream mj(dir / "procs" / r->bg_id / "monitor.json");
    std::string text((std::istreambuf_iterator<char>(mj)), {});
    auto pos = text.find("\"monitorPid\":");
    pid_t mon = pos == std::string::npos ? 0 : std::atoi(text.c_str() + pos + 13);
    std::printf("%-44s Rss %ld kB, Pss %ld kB, Pss_Anon %ld kB\n", "idle monitor memory", smaps_kb(mon, "Rss"),
                smaps_kb(mon, "Pss"), smaps_kb(mon, "Pss_Anon"));
    s.stop_and_wait(r->bg_id, std::chrono::seconds(10));
  }
  opened.value().reset();
  std::filesystem::remove_all(dir);
  return 0;
}
