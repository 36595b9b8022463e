#include "supervisor/cpu_sampler.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "supervisor/cgroup.hpp"
#include "supervisor/proc_tree.hpp"

namespace sup {

CpuSampler::~CpuSampler() {
  {
    std::lock_guard g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

bool CpuSampler::stale(const Sample& s, Clock::time_point now) const {
  return s.at == Clock::time_point{} || now - s.at >= interval_;
}

void CpuSampler::take(const Tree& t, const std::vector<ProcEntry>& all) {
  static const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::uint64_t started = 0;
  std::uint64_t ticks = 0;
  if (t.cgroup.empty()) {
    ticks = tree_cpu_ticks(t.monitor, all, &started);
  } else {  // the kernel's count: one read, however many processes
    std::shared_ptr<UniqueFd> stat;
    bool first = false;
    {
      std::lock_guard g(mu_);
      auto it = samples_.find(t.id);
      if (it == samples_.end()) return;  // forgotten meanwhile
      if (!it->second.cpu_stat) it->second.cpu_stat = std::make_shared<UniqueFd>(Cgroup(t.cgroup).open_cpu_stat());
      stat = it->second.cpu_stat;
      first = it->second.at == Clock::time_point{};
    }
    const std::optional<std::uint64_t> usec = *stat ? Cgroup::cpu_usec(stat->get()) : Cgroup(t.cgroup).cpu_usec();
    ticks = usec.value_or(0) * static_cast<std::uint64_t>(hz) / 1000000;
    if (first) started = process_start_time(t.monitor).value_or(0);  // only the first sample needs it
  }
  const auto now = Clock::now();
  timespec boot{};
  ::clock_gettime(CLOCK_BOOTTIME, &boot);
  std::lock_guard g(mu_);
  auto it = samples_.find(t.id);
  if (it == samples_.end()) return;  // forgotten meanwhile
  Sample& s = it->second;
  s.busy = false;
  double secs = 0, used = 0;
  if (s.at != Clock::time_point{}) {
    secs = std::chrono::duration<double>(now - s.at).count();
    used = static_cast<double>(ticks - std::min(ticks, s.ticks)) / hz;
  } else if (started > 0) {
    // The first sample: the tree's whole life so far (it started at 0 ticks).
    secs = static_cast<double>(boot.tv_sec) + static_cast<double>(boot.tv_nsec) / 1e9 -
           static_cast<double>(started) / hz;
    used = static_cast<double>(ticks) / hz;
  }
  s.percent = secs > 0 ? std::round(used / secs * 1000.0) / 10.0 : 0;
  s.ticks = ticks;
  s.at = now;
}

double CpuSampler::percent(const Tree& t) {
  {
    std::lock_guard g(mu_);
    Sample& s = samples_[t.id];
    if (!stale(s, Clock::now())) return s.percent;
    s.busy = true;
  }
  take(t, t.cgroup.empty() ? scan_processes() : std::vector<ProcEntry>{});
  std::lock_guard g(mu_);
  auto it = samples_.find(t.id);
  return it == samples_.end() ? 0 : it->second.percent;
}

std::vector<double> CpuSampler::percents(const std::vector<Tree>& trees) {
  // Claimed under mu_ (so no other caller samples them too), oldest first.
  std::vector<std::pair<Clock::time_point, const Tree*>> due;
  {
    std::lock_guard g(mu_);
    const auto now = Clock::now();
    for (const Tree& t : trees) {
      Sample& s = samples_[t.id];
      if (!stale(s, now) || s.busy) continue;
      s.busy = true;
      due.emplace_back(s.at, &t);
    }
  }
  std::stable_sort(due.begin(), due.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::size_t done = 0;
  // One pass over /proc serves every tree sampled now (none when each has a
  // cgroup); the budget is for the trees, after it.
  const bool walk = std::any_of(due.begin(), due.end(), [](const auto& d) { return d.second->cgroup.empty(); });
  const std::vector<ProcEntry> all = walk ? scan_processes() : std::vector<ProcEntry>{};
  const auto until = Clock::now() + budget_;
  for (; done < due.size() && Clock::now() < until; ++done) take(*due[done].second, all);

  std::vector<double> out;
  out.reserve(trees.size());
  {
    std::lock_guard g(mu_);
    for (std::size_t k = done; k < due.size(); ++k) queue_.push_back(*due[k].second);
    for (const Tree& t : trees) {
      auto it = samples_.find(t.id);
      out.push_back(it == samples_.end() ? 0 : it->second.percent);
    }
    if (done < due.size() && !worker_.joinable())
      worker_ = std::thread([this] {
        ::pthread_setname_np(::pthread_self(), "sbx-cpu");
        run();
      });
  }
  if (done < due.size()) cv_.notify_one();
  return out;
}

void CpuSampler::forget(const std::string& id) {
  std::lock_guard g(mu_);
  samples_.erase(id);
}

void CpuSampler::run() {
  std::unique_lock g(mu_);
  for (;;) {
    cv_.wait(g, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::vector<Tree> batch;
    batch.swap(queue_);
    g.unlock();
    const bool walk = std::any_of(batch.begin(), batch.end(), [](const Tree& t) { return t.cgroup.empty(); });
    const std::vector<ProcEntry> all = walk ? scan_processes() : std::vector<ProcEntry>{};
    for (const Tree& t : batch) take(t, all);
    g.lock();
  }
}

}  // namespace sup
