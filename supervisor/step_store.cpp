#include "supervisor/step_store.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <fstream>
#include <sstream>

#include "supervisor/clock.hpp"
#include "supervisor/files.hpp"
#include "supervisor/utf8.hpp"

namespace sup {

namespace {

constexpr std::size_t kMaxSteps = 1000;
constexpr std::size_t kMaxName = 200;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string StepStore::file_of(const sup::CommandStatus& st) {
  const std::size_t slash = st.log_file.rfind('/');
  if (slash == std::string::npos) return {};
  return st.log_file.substr(0, slash) + "/steps.json";
}

void StepStore::forget(const std::string& bg_id) {
  std::lock_guard g(mu_);
  const std::string prefix = bg_id + "@";
  for (auto it = runs_.lower_bound(prefix); it != runs_.end() && it->first.starts_with(prefix);) it = runs_.erase(it);
}

std::vector<StepStore::Step>& StepStore::run_of(const sup::CommandStatus& st) {
  const std::string key = st.bg_id + "@" + st.started_at;
  auto [it, inserted] = runs_.try_emplace(key);
  if (inserted) {
    // A new run of a restart policy: the runs before it are over.
    const std::string prefix = st.bg_id + "@";
    for (auto old = runs_.lower_bound(prefix); old != runs_.end() && old->first.starts_with(prefix);)
      old = old == it ? std::next(old) : runs_.erase(old);
    // Taken back after a restart: what the last daemon saved of this run
    // (the folder holds the last run's steps; a step saved without its run
    // is from an older daemon, and kept).
    std::ifstream in(file_of(st));
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_array())
      for (const nlohmann::json& s : j) {
        if (!s.is_object() || !s.value("name", nlohmann::json()).is_string()) continue;
        if (s.contains("run") && s["run"] != st.started_at) continue;
        Step step;
        step.name = s["name"];
        step.started_at = s.value("startedAt", "");
        step.start_ms = s.value("startMs", std::int64_t{0});
        if (s.value("ms", nlohmann::json()).is_number_integer()) step.ms = s["ms"].get<std::int64_t>();
        if (s.value("exitCode", nlohmann::json()).is_number_integer()) step.exit_code = s["exitCode"].get<int>();
        step.running = s.value("running", false);
        it->second.push_back(std::move(step));
      }
  }
  return it->second;
}

sup::Status StepStore::apply(const sup::CommandStatus& st, std::string_view lines) {
  // Steps are of a run: a queued command has none yet (as its signal, ESRCH).
  if (st.queued) return sup::Error{sup::Errc::no_such_process, "'" + st.bg_id + "' is queued: it has not started yet"};
  if (st.state == "empty" || st.started_at.empty())
    return sup::Error{sup::Errc::invalid_argument, "no command has run in this slot"};
  // Steps are told from inside the run: once it has ended they are closed.
  if (!st.running) return sup::Error{sup::Errc::no_such_process, "'" + st.bg_id + "' has ended: its steps are closed"};
  if (st.state == "restarting")
    return sup::Error{sup::Errc::no_such_process,
                      "'" + st.bg_id + "' is between runs: the last run's steps are closed, the next run's not begun"};
  std::lock_guard g(mu_);
  std::vector<Step>& steps = run_of(st);
  bool changed = false;
  sup::Status result = sup::Ok{};
  while (!lines.empty()) {
    const std::size_t nl = lines.find('\n');
    const std::string_view line = trim(lines.substr(0, nl));
    lines.remove_prefix(nl == std::string_view::npos ? lines.size() : nl + 1);
    if (line.empty()) continue;
    result = apply_line(steps, line);
    if (!result) break;
    changed = true;
  }
  // Lines before a bad one stay applied, so they are saved as well.
  if (changed) save(st, steps);
  return result;
}

sup::Status StepStore::apply_line(std::vector<Step>& steps, std::string_view line) {
  // Everything kept must be text: steps.json (here and in the state
  // directory) is JSON, which holds nothing else.
  if (const std::optional<std::string> why = sup::why_not_text(line))
    return sup::Error{sup::Errc::invalid_argument, "a step line must be UTF-8 text: " + *why};
  if (line.starts_with("start ") || line.starts_with("start\t")) {
    const std::string_view name = trim(line.substr(6));
    if (name.empty()) return sup::Error{sup::Errc::invalid_argument, "start: a step needs a name"};
    if (steps.size() >= kMaxSteps)
      return sup::Error{sup::Errc::invalid_argument, "more than 1000 steps in one command"};
    Step s;
    s.name = std::string(sup::utf8_head(name, kMaxName));
    s.started_at = sup::iso_now();
    s.start_ms = sup::now_ms();
    steps.push_back(std::move(s));
    return sup::Ok{};
  }
  if (line == "end" || line.starts_with("end ")) {
    std::string_view code = trim(line.substr(3));
    // `end CODE NAME`: that step (sbx-step NAME -- COMMAND), whatever its
    // command left running after it.
    std::string_view name;
    if (const std::size_t blank = code.find_first_of(" \t"); blank != std::string_view::npos) {
      name = trim(code.substr(blank));
      code = code.substr(0, blank);
    }
    std::optional<int> exit_code;
    if (!code.empty()) {
      int v = 0;
      const auto [p, ec] = std::from_chars(code.data(), code.data() + code.size(), v);
      if (ec != std::errc() || p != code.data() + code.size())
        return sup::Error{sup::Errc::invalid_argument, "end: the exit code must be a number"};
      exit_code = v;
    }
    const std::string named(sup::utf8_head(name, kMaxName));  // as `start` kept it
    auto open = std::find_if(steps.rbegin(), steps.rend(),
                             [&](const Step& s) { return s.running && (named.empty() || s.name == named); });
    if (open == steps.rend())
      return sup::Error{sup::Errc::invalid_argument,
                        named.empty() ? "end: no step is running" : "end: no step '" + named + "' is running"};
    open->running = false;
    open->ms = sup::now_ms() - open->start_ms;
    open->exit_code = exit_code;
    return sup::Ok{};
  }
  return sup::Error{sup::Errc::invalid_argument, "write 'start NAME' or 'end [EXITCODE [NAME]]'"};
}

void StepStore::save(const sup::CommandStatus& st, const std::vector<Step>& steps) const {
  const std::string file = file_of(st);
  if (file.empty()) return;
  nlohmann::json saved = dump(steps, true);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    saved[i]["startMs"] = steps[i].start_ms;
    saved[i]["run"] = st.started_at;  // whose steps these are, for a daemon that takes them back
  }
  if (const sup::Status ok = sup::write_file_atomic(file, saved.dump() + "\n", false); !ok)
    if (warn_) warn_("cannot save " + file + ": " + ok.error().message);
}

nlohmann::json StepStore::dump(const std::vector<Step>& steps, bool command_running) {
  nlohmann::json out = nlohmann::json::array();
  for (const Step& s : steps) {
    nlohmann::json j = {
        {"name", s.name},
        {"startedAt", s.started_at},
        {"ms", s.ms ? nlohmann::json(*s.ms) : nlohmann::json(nullptr)},
        {"exitCode", s.exit_code ? nlohmann::json(*s.exit_code) : nlohmann::json(nullptr)},
        {"running", s.running && command_running},
    };
    if (s.running && !command_running) j["unfinished"] = true;
    out.push_back(std::move(j));
  }
  return out;
}

nlohmann::json StepStore::to_json(const sup::CommandStatus& st) {
  if (st.state == "empty" || st.started_at.empty()) return nlohmann::json::array();
  std::lock_guard g(mu_);
  return dump(run_of(st), st.running && st.state != "restarting");
}

}  // namespace sup
