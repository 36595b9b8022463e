// The box's steps at a day's volume: 100 000 starts, each a step and its
// completion, as the daemon writes them (sup::BoxSteps into a temporary
// state directory). Prints one JSON line: the bytes on disk, and the median
// cost of a step, beside a plain write(2) of a line of the same size to an
// O_APPEND file (the floor: one system call).
//   bench_box_steps [N] [DIR]
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "supervisor/box_steps.hpp"
#include "supervisor/clock.hpp"

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 100000;
  char tmpl[] = "/tmp/sbx-bench-steps-XXXXXX";
  const std::string base = argc > 2 ? argv[2] : (::mkdtemp(tmpl) ? tmpl : "/tmp");
  const std::string dir = base + "/steps";
  auto opened = sup::BoxSteps::open(dir, std::chrono::hours(24 * 7));
  if (!opened) {
    std::fprintf(stderr, "bench_box_steps: %s\n", opened.error().message.c_str());
    return 1;
  }
  sup::BoxSteps& steps = *opened.value();
  using Clock = std::chrono::steady_clock;
  std::vector<double> add_us, done_us;
  add_us.reserve(static_cast<std::size_t>(n));
  done_us.reserve(static_cast<std::size_t>(n));
  std::size_t line_bytes = 0;
  for (int i = 0; i < n; ++i) {
    // What an agent's day looks like: short commands, one work dir, one client.
    sup::BoxStep s;
    s.kind = "start";
    s.summary = "npm test -- --grep 'case " + std::to_string(i % 500) + "'";
    s.bg_id = std::to_string(100000 + i);
    s.cwd = "/work/app";
    s.client = "agent-7f3a";
    s.ok = true;
    const auto t0 = Clock::now();
    steps.add(std::move(s), true);
    const auto t1 = Clock::now();
    steps.complete_ended(std::to_string(100000 + i), i % 7 ? 0 : 1, "", false, sup::now_ms());
    const auto t2 = Clock::now();
    add_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    done_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  std::uintmax_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) bytes += e.file_size();
  line_bytes = bytes / static_cast<std::size_t>(2 * n);

  // The floor: the same number of bytes per line, one write(2) each.
  const std::string floor_path = base + "/floor.jsonl";
  const int fd = ::open(floor_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  const std::string line(line_bytes > 0 ? line_bytes - 1 : 0, 'x');
  std::vector<double> floor_us;
  for (int i = 0; i < n && fd >= 0; ++i) {
    const std::string text = line + "\n";
    const auto t0 = Clock::now();
    if (::write(fd, text.data(), text.size()) < 0) break;
    floor_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  if (fd >= 0) ::close(fd);
  std::printf("{\"steps\": %d, \"bytes\": %ju, \"lineBytes\": %zu, \"addUs\": %.2f, \"completeUs\": %.2f, "
              "\"writeUs\": %.2f}\n",
              n, bytes, line_bytes, median(add_us), median(done_us), median(floor_us));
  if (argc <= 2) std::filesystem::remove_all(base);
  return 0;
}
