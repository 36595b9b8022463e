#include "supervisor/cpu_sampler.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

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

void CpuSampler::take(const Tree& t) {
  static const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const std::uint64_t ticks = tree_cpu_ticks(t.monitor);
  const auto now = Clock::now();
  std::lock_guard g(mu_);
  auto it = samples_.find(t.id);
  if (it == samples_.end()) return;  // forgotten meanwhile
  Sample& s = it->second;
  s.queued = false;
  if (s.at != Clock::time_point{}) {
    const double secs = std::chrono::duration<double>(now - s.at).count();
    const double used = static_cast<double>(ticks - std::min(ticks, s.ticks)) / hz;
    s.percent = secs > 0 ? std::round(used / secs * 1000.0) / 10.0 : 0;
  }
  s.ticks = ticks;
  s.at = now;
}

double CpuSampler::percent(const Tree& t) {
  {
    std::lock_guard g(mu_);
    Sample& s = samples_[t.id];
    if (!stale(s, Clock::now())) return s.percent;
  }
  take(t);
  std::lock_guard g(mu_);
  auto it = samples_.find(t.id);
  return it == samples_.end() ? 0 : it->second.percent;
}

std::vector<double> CpuSampler::percents(const std::vector<Tree>& trees) {
  std::vector<double> out;
  out.reserve(trees.size());
  bool queued = false;
  {
    std::lock_guard g(mu_);
    const auto now = Clock::now();
    for (const Tree& t : trees) {
      Sample& s = samples_[t.id];
      out.push_back(s.percent);
      if (stale(s, now) && !s.queued) {
        s.queued = true;
        queue_.push_back(t);
        queued = true;
      }
    }
    if (queued && !worker_.joinable())
      worker_ = std::thread([this] {
        ::pthread_setname_np(::pthread_self(), "sbx-cpu");
        run();
      });
  }
  if (queued) cv_.notify_one();
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
    for (const Tree& t : batch) take(t);
    g.lock();
  }
}

}  // namespace sup
