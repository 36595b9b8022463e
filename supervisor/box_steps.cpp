#include "supervisor/box_steps.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>

#include "supervisor/clock.hpp"
#include "supervisor/files.hpp"
#include "supervisor/utf8.hpp"

namespace sup {

namespace {

using nlohmann::json;

constexpr std::string_view kSuffix = ".jsonl";

/// "2026-12-01" of an ISO timestamp: the day file it goes to.
std::string day_of(const std::string& at) { return at.substr(0, 10); }

json opt(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

/// A completion (the command ended, or never ran) applied to `s`: what a
/// `done` line carries, and what follows from it. Small on disk: timedOut only when
/// true, ok never (a stop was carried out; a start is ok when it exited 0).
void apply_done(BoxStep& s, const json& d) {
  if (d.contains("error") && d["error"].is_object()) {  // the command never ran after all (fail_open)
    s.error = BoxStep::Refusal{d["error"].value("code", ""), d["error"].value("message", "")};
    s.ok = false;
    return;
  }
  if (d.contains("ms") && d["ms"].is_number()) s.ms = d["ms"].get<double>();
  if (d.contains("exitCode") && d["exitCode"].is_number_integer()) s.exit_code = d["exitCode"].get<int>();
  if (d.contains("signal") && d["signal"].is_string()) s.signal = d["signal"].get<std::string>();
  s.timed_out = d.contains("timedOut") && d["timedOut"].is_boolean() && d["timedOut"].get<bool>();
  s.ok = s.kind == "stop" || (s.exit_code && *s.exit_code == 0 && s.signal.empty() && !*s.timed_out);
}

/// A step line of the file (no completion applied); nullopt for anything else.
std::optional<BoxStep> step_of_line(const json& j) {
  if (!j.is_object() || !j.contains("id") || !j["id"].is_number_unsigned() || !j.contains("at") ||
      !j["at"].is_string() || !j.contains("kind") || !j["kind"].is_string())
    return std::nullopt;
  BoxStep s;
  s.id = j["id"].get<std::uint64_t>();
  s.at = j["at"].get<std::string>();
  s.kind = j["kind"].get<std::string>();
  auto str = [&](const char* k) { return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : ""; };
  s.summary = str("summary");
  s.note = str("note");
  s.bg_id = str("bgId");
  s.cwd = str("cwd");
  s.client = str("client");
  s.ok = true;
  if (j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    s.error = BoxStep::Refusal{e.value("code", ""), e.value("message", "")};
    s.ok = false;
  }
  return s;
}

json line_of(const BoxStep& s) {
  json j = {{"id", s.id}, {"at", s.at}, {"kind", s.kind}, {"summary", s.summary}};
  // Only what is there: a day of steps must stay small on disk.
  if (!s.note.empty()) j["note"] = s.note;
  if (!s.bg_id.empty()) j["bgId"] = s.bg_id;
  if (!s.cwd.empty()) j["cwd"] = s.cwd;
  if (!s.client.empty()) j["client"] = s.client;
  // ok is not stored: it follows from error and from the completion.
  if (s.error) j["error"] = {{"code", s.error->code}, {"message", s.error->message}};
  return j;
}

}  // namespace

json BoxStep::to_json() const {
  json j = {{"at", at},         {"kind", kind},        {"summary", summary},
            {"note", opt(note)}, {"bgId", opt(bg_id)}, {"cwd", opt(cwd)},
            {"client", opt(client)}};
  j["ms"] = ms ? json(static_cast<std::int64_t>(std::llround(*ms))) : json(nullptr);  // whole milliseconds, as steps.json shows them
  j["ok"] = ok ? json(*ok) : json(nullptr);
  j["exitCode"] = exit_code ? json(*exit_code) : json(nullptr);
  j["signal"] = opt(signal);
  j["timedOut"] = timed_out ? json(*timed_out) : json(nullptr);
  j["error"] = error ? json{{"code", error->code}, {"message", error->message}} : json(nullptr);
  return j;
}

std::string BoxSteps::cut(std::string_view text, std::size_t max) {
  // Characters as a reader sees them: a byte that starts no valid one is
  // one (JSON shows it as U+FFFD), so stray bytes cannot make it longer.
  std::size_t i = 0, chars = 0, keep = 0;
  while (i < text.size() && chars <= max) {
    if (chars + 1 == max) keep = i;
    const std::size_t len = utf8_char_len(text, i);
    i += len ? len : 1;
    ++chars;
  }
  if (chars <= max && i >= text.size()) return std::string(text);
  return std::string(text.substr(0, keep)) + "\u2026";
}

Result<std::unique_ptr<BoxSteps>> BoxSteps::open(std::string dir, std::chrono::seconds keep) {
  if (auto m = make_dirs(dir, 0700); !m) return m.error();
  auto b = std::make_unique<BoxSteps>(std::move(dir), keep);
  std::lock_guard g(b->mu_);
  b->prune_days();
  // The latest steps and the open ones come from the last two days: a start
  // older than that is not completed when its command ends.
  std::vector<std::string> files = b->day_files();
  if (files.size() > 2) files.erase(files.begin(), files.end() - 2);
  std::uint64_t last_id = 0;
  std::vector<BoxStep> steps = b->read_days(files, &last_id);
  // Ids go on from the latest ones, expired ones included: a command still
  // running completes its start step by id, also after steps older than
  // keep are hidden, so an id is never given twice while its line is kept.
  b->next_id_ = std::max(b->next_id_, last_id + 1);
  for (const BoxStep& s : steps) {
    if ((s.kind == "start" || s.kind == "stop") && !s.ms && !s.error && !s.bg_id.empty()) {
      if (auto t = iso_to_ms(s.at)) b->open_[s.bg_id].push_back({s.id, *t, s.kind});
    }
  }
  const std::size_t from = steps.size() > kShown ? steps.size() - kShown : 0;
  b->latest_.assign(steps.begin() + static_cast<std::ptrdiff_t>(from), steps.end());
  return b;
}

std::vector<std::string> BoxSteps::day_files() const {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir_.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() == 10 + kSuffix.size() && n.ends_with(kSuffix)) out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());  // YYYY-MM-DD sorts by time
  return out;
}

bool BoxSteps::expired(const std::string& at) const {
  if (keep_.count() <= 0) return false;
  const std::optional<std::int64_t> t = iso_to_ms(at);
  return t && *t < now_ms() - std::chrono::duration_cast<std::chrono::milliseconds>(keep_).count();
}

void BoxSteps::prune_days() {
  if (keep_.count() <= 0) return;
  for (const std::string& f : day_files()) {
    // Everything in a day file is from before the next midnight.
    const std::optional<std::int64_t> start = iso_to_ms(f.substr(0, 10) + "T00:00:00.000Z");
    if (!start) continue;
    const std::int64_t end = *start + 24LL * 3600 * 1000;
    if (end < now_ms() - std::chrono::duration_cast<std::chrono::milliseconds>(keep_).count())
      ::unlink((dir_ + "/" + f).c_str());
  }
}

std::vector<BoxStep> BoxSteps::read_days(const std::vector<std::string>& files, std::uint64_t* last_id) const {
  std::vector<BoxStep> out;
  std::unordered_map<std::uint64_t, std::size_t> index;
  for (const std::string& f : files) {
    std::ifstream in(dir_ + "/" + f);
    std::string line;
    while (std::getline(in, line)) {
      const json j = json::parse(line, nullptr, false);  // a torn last line is discarded
      if (!j.is_object()) continue;
      if (j.contains("done") && j.contains("id") && j["id"].is_number_unsigned()) {
        auto it = index.find(j["id"].get<std::uint64_t>());
        if (it != index.end()) apply_done(out[it->second], j["done"]);
        continue;
      }
      std::optional<BoxStep> s = step_of_line(j);
      if (s && last_id) *last_id = std::max(*last_id, s->id);
      if (!s || expired(s->at)) continue;
      index[s->id] = out.size();
      out.push_back(std::move(*s));
    }
  }
  return out;
}

void BoxSteps::append(const json& line) {
  const std::string today = day_of(iso_now());
  if (!fd_ || today != day_) {
    prune_days();
    const std::string path = dir_ + "/" + today + std::string(kSuffix);
    fd_.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
    day_ = today;
    // A line torn by a crash would swallow the next one: end it first.
    char last = '\n';
    const off_t size = fd_ ? ::lseek(fd_.get(), 0, SEEK_END) : 0;
    if (size > 0 && ::pread(fd_.get(), &last, 1, size - 1) == 1 && last != '\n')
      [[maybe_unused]] const ssize_t n = ::write(fd_.get(), "\n", 1);
  }
  if (!fd_) return;  // the history is best effort: a full disk must not fail a start
  const std::string text = line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  // One write(2) with O_APPEND: whole lines, even with several daemons' worth of writers.
  [[maybe_unused]] const ssize_t n = ::write(fd_.get(), text.data(), text.size());
}

std::uint64_t BoxSteps::add(BoxStep s, bool open_until_end) {
  if (s.at.empty()) s.at = iso_now();
  // A request or a condition as written ends in its newline: not part of what was done.
  while (!s.summary.empty() && (s.summary.back() == '\n' || s.summary.back() == '\r')) s.summary.pop_back();
  s.summary = cut(s.summary);
  s.note = cut(s.note);
  std::lock_guard g(mu_);
  s.id = next_id_++;
  append(line_of(s));
  if (open_until_end && !s.bg_id.empty()) {
    if (auto t = iso_to_ms(s.at)) open_[s.bg_id].push_back({s.id, *t, s.kind});
  }
  latest_.push_back(std::move(s));
  while (latest_.size() > kShown) latest_.pop_front();
  return latest_.back().id;
}

void BoxSteps::complete_ended(const std::string& bg_id, std::optional<int> exit_code, const std::string& signal,
                              bool timed_out, std::int64_t ended_at_ms) {
  std::lock_guard g(mu_);
  auto it = open_.find(bg_id);
  if (it == open_.end()) return;
  for (const OpenStep& o : it->second) {
    json done = {{"ms", std::max<std::int64_t>(0, ended_at_ms - o.at_ms)}};
    if (exit_code) done["exitCode"] = *exit_code;
    if (!signal.empty()) done["signal"] = signal;
    if (timed_out) done["timedOut"] = true;
    for (BoxStep& s : latest_)
      if (s.id == o.id) apply_done(s, done);
    append({{"id", o.id}, {"done", done}});
  }
  open_.erase(it);
}

void BoxSteps::fail_open(const std::string& bg_id, const BoxStep::Refusal& why) {
  std::lock_guard g(mu_);
  auto it = open_.find(bg_id);
  if (it == open_.end()) return;
  const json done = {{"error", {{"code", why.code}, {"message", why.message}}}};
  for (const OpenStep& o : it->second) {
    for (BoxStep& s : latest_)
      if (s.id == o.id) apply_done(s, done);
    append({{"id", o.id}, {"done", done}});
  }
  open_.erase(it);
}

std::vector<std::string> BoxSteps::open_ids() const {
  std::lock_guard g(mu_);
  std::vector<std::string> out;
  out.reserve(open_.size());
  for (const auto& [id, steps] : open_) out.push_back(id);
  return out;
}

bool BoxSteps::has_open(const std::string& bg_id) const {
  std::lock_guard g(mu_);
  return open_.count(bg_id) != 0;
}

void BoxSteps::drop_open(const std::string& bg_id) {
  std::lock_guard g(mu_);
  open_.erase(bg_id);
}

json BoxSteps::latest() const {
  json out = json::array();
  std::lock_guard g(mu_);
  for (const BoxStep& s : latest_)
    if (!expired(s.at)) out.push_back(s.to_json());
  return out;
}

std::string BoxSteps::all() const {
  // Written a step at a time, as dump(2) writes the whole array: a week of
  // a busy box is tens of MiB of steps, and the array of them as JSON
  // objects took six times that in the daemon, for every reader at once.
  std::string out = "[";
  const std::vector<BoxStep> steps = read_days(day_files());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::string one = steps[i].to_json().dump(2, ' ', false, json::error_handler_t::replace);
    out += i == 0 ? "\n  " : ",\n  ";
    for (const char c : one) {
      out += c;
      if (c == '\n') out += "  ";  // one level in, inside the array
    }
  }
  out += steps.empty() ? "]\n" : "\n]\n";
  return out;
}

}  // namespace sup
