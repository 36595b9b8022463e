#include "supervisor/reader_probes.hpp"

#include <vector>

#include "supervisor/readiness_probe.hpp"

namespace sup {

std::uint64_t ReaderProbes::add(const std::string& id, ReadyCondition c, std::string dir, OnReady on_ready,
                                std::function<Stage()> stage) {
  const std::uint64_t token = next_++;
  auto guard = std::make_shared<Guard>();
  guard->fn = std::move(on_ready);
  {
    std::lock_guard g(mu_);
    guards_.emplace(token, guard);
  }
  loop_.post([this, token, id, c = std::move(c), dir = std::move(dir), guard, stage = std::move(stage)] {
    {
      std::lock_guard g(guard->mu);
      if (!guard->fn) return;  // cancelled already
    }
    // Queued: its start posts started() after this (the state changes
    // before the post), so none is missed.
    const Stage now = stage();
    if (now == Stage::over) return;
    Probe& p = probes_[token] = Probe{id, c, guard, nullptr, dir};
    if (now == Stage::queued) p.waits_for_start = true;
    else begin(token, p);
  });
  return token;
}

void ReaderProbes::begin(std::uint64_t token, Probe& p) {
  const bool tries = p.cond.kind == ReadyCondition::Kind::port || p.cond.kind == ReadyCondition::Kind::http;
  if (!tries || record_probe_(p.id) != p.cond) start(token, p);
}

void ReaderProbes::started(const std::string& id) {
  std::vector<std::uint64_t> waiting;  // a probe's start may post, never erase: still, collect first
  for (const auto& [token, p] : probes_)
    if (p.id == id && p.waits_for_start) waiting.push_back(token);
  for (std::uint64_t token : waiting)
    if (auto it = probes_.find(token); it != probes_.end()) {
      it->second.waits_for_start = false;
      begin(token, it->second);
    }
}

void ReaderProbes::start(std::uint64_t token, Probe& p) {
  if (p.cond.kind == ReadyCondition::Kind::notify) notify_.insert(token);
  // On the loop thread, as is the decision to stop reporting writes:
  // none falls between this and the probe's entry below.
  if (p.cond.kind == ReadyCondition::Kind::log) want_output_(p.id);
  p.probe = ReadinessProbe::start(loop_, p.cond, p.dir, p.cond.kind == ReadyCondition::Kind::log ? logs_.of(p.id) : nullptr,
                                  [this, token, guard = p.guard](const ReadyMatch& m) { fire(token, guard, m); });
}

void ReaderProbes::record_probe_changed(const std::string& id) {
  const std::optional<ReadyCondition> now = record_probe_(id);
  std::vector<std::uint64_t> on_their_own;
  for (auto& [token, p] : probes_)
    if (p.id == id && !p.probe && !p.waits_for_start && p.cond != now) on_their_own.push_back(token);
  for (std::uint64_t token : on_their_own)
    if (auto it = probes_.find(token); it != probes_.end()) start(token, it->second);
}

bool ReaderProbes::watching(const std::string& id) const {
  for (const auto& [token, p] : probes_)
    if (p.id == id && p.cond.kind == ReadyCondition::Kind::log) return true;
  return false;
}

void ReaderProbes::cancel(std::uint64_t token) {
  std::shared_ptr<Guard> guard;
  {
    std::lock_guard g(mu_);
    auto it = guards_.find(token);
    if (it == guards_.end()) return;
    guard = std::move(it->second);
    guards_.erase(it);
  }
  {
    std::lock_guard g(guard->mu);
    guard->fn = nullptr;
  }
  loop_.post([this, token] { erase(token); });
}

void ReaderProbes::erase(std::uint64_t token) {
  probes_.erase(token);
  notify_.erase(token);
}

void ReaderProbes::fire(std::uint64_t token, const std::shared_ptr<Guard>& guard, const ReadyMatch& m) {
  {
    std::lock_guard g(guard->mu);
    if (guard->fn) {
      OnReady fn = std::move(guard->fn);
      guard->fn = nullptr;
      fn(m);
    }
  }
  // Not now: this runs inside the probe.
  loop_.post([this, token] { erase(token); });
}

void ReaderProbes::held(const std::string& id, const ReadyCondition& c, const ReadyMatch& m) {
  std::vector<std::pair<std::uint64_t, std::shared_ptr<Guard>>> same;  // fire() posts erases: collect first
  for (auto& [token, p] : probes_)
    if (p.id == id && p.cond == c) same.emplace_back(token, p.guard);
  for (auto& [token, guard] : same) fire(token, guard, m);
}

template <class Fn>
void ReaderProbes::each_of(const std::string& id, Fn fn) {
  // A callback may post an erase, never erase at once: still, walk a copy.
  std::vector<std::shared_ptr<ReadinessProbe>> mine;
  for (auto& [token, p] : probes_)
    if (p.id == id && p.probe) mine.push_back(p.probe);
  for (auto& p : mine) fn(*p);
}

void ReaderProbes::output(const std::string& id) {
  std::vector<std::shared_ptr<ReadinessProbe>> mine;  // a callback may post an erase: walk a copy
  for (std::uint64_t token : notify_)
    if (auto it = probes_.find(token); it != probes_.end() && it->second.id == id) mine.push_back(it->second.probe);
  for (auto& p : mine) p->output();
}

void ReaderProbes::finish(const std::string& id) {
  each_of(id, [](ReadinessProbe& p) { p.finish(); });
  std::erase_if(probes_, [&](const auto& kv) { return kv.second.id == id; });
  std::erase_if(notify_, [&](std::uint64_t token) { return !probes_.count(token); });
}

void ReaderProbes::clear() {
  probes_.clear();
  notify_.clear();
}

}  // namespace sup
