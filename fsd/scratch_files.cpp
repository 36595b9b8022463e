#include "fsd/scratch_files.hpp"

#include <cerrno>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "fsd/error_log.hpp"
#include "fsd/inode.hpp"
#include "supervisor/secrets.hpp"
#include "supervisor/supervisor.hpp"

namespace fsd {

namespace {

timespec now_realtime() {
  timespec t{};
  clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

std::string join(const std::string& dir_path, std::string_view name) {
  return dir_path.empty() ? std::string(name) : dir_path + "/" + std::string(name);
}

}  // namespace

struct ScratchFiles::State {
  struct Entry {
    Info info;
    std::string name;
    std::string content;
    unsigned open = 0;
    unsigned writers = 0;      // of them, writing to it: not done (written()) yet
    std::shared_ptr<const Delivery> delivery;  // renamed over a file of the tree while written to
    std::shared_ptr<const Delivery> delivered;  // that delivery, once made: nothing more can go there
    bool named = true;         // false: unlinked while open, gone at the last close
    std::uint64_t closes = 0;  // which last close a time-to-live timer belongs to
  };
  using Key = std::tuple<fuse_ino_t, uid_t, std::string>;  // folder, owner, name

  State(sup::Supervisor& s, ErrorLog& e, std::size_t max, std::chrono::milliseconds t, bool sh)
      : sup(s), errors(e), max_bytes(max), ttl(t), shared(sh) {}

  sup::Supervisor& sup;
  ErrorLog& errors;
  const std::size_t max_bytes;
  const std::chrono::milliseconds ttl;
  const bool shared;

  mutable std::mutex mu;
  std::unordered_map<fuse_ino_t, Entry> files;  // guarded by mu
  std::map<Key, fuse_ino_t> names;               // guarded by mu
  std::map<uid_t, std::size_t> per_user;         // guarded by mu
  std::uint64_t next = 1;                        // guarded by mu

  /// Takes the name (and the user's count) away; the file itself goes with
  /// its last close, as an unlinked file does. Needs mu.
  void unname(Entry& e) {
    if (!e.named) return;
    e.named = false;
    names.erase(Key{e.info.dir, e.info.uid, e.name});
    if (--per_user[e.info.uid] == 0) per_user.erase(e.info.uid);
  }
  void erase(std::unordered_map<fuse_ino_t, Entry>::iterator it) {  // needs mu
    unname(it->second);
    files.erase(it);
  }
  /// unlink, or replaced by a rename. Needs mu.
  void remove(std::unordered_map<fuse_ino_t, Entry>::iterator it) {
    if (it->second.open > 0) unname(it->second);
    else erase(it);
  }

  Entry* get(fuse_ino_t ino) {  // needs mu
    auto it = files.find(ino);
    return it == files.end() ? nullptr : &it->second;
  }

  void expire(fuse_ino_t ino, std::uint64_t closes) {
    std::string path, content;
    {
      std::lock_guard g(mu);
      auto it = files.find(ino);
      if (it == files.end() || it->second.open > 0 || it->second.closes != closes) return;
      path = it->second.info.path;
      content = std::move(it->second.content);
      erase(it);
    }
    // Shown as a refused request is: its own secretEnv masked, then errors
    // masks those of the record whose folder held it and the global ones,
    // each in the whole text before it is cut.
    content = sup::mask_secrets_in_json(content, sup::request_secrets(content));
    // A scratch file is its creator's alone; every user reads `errors`.
    if (shared) content = "(" + std::to_string(content.size()) + " bytes, not shown: the file was its creator's alone)";
    std::string id;
    if (path.starts_with("procs/")) id = path.substr(6, path.find('/', 6) - 6);
    const auto secs = std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count() / 1000.0;
    char when[32];
    std::snprintf(when, sizeof when, "%g", secs);
    errors.add(path, ETIMEDOUT,
               std::string("scratch file removed: nobody renamed it onto a file of the tree within ") + when +
                   " s of its last close (a typo in the name?)",
               content, id);
  }
};

ScratchFiles::ScratchFiles(sup::Supervisor& sup, ErrorLog& errors, std::size_t max_bytes,
                           std::chrono::milliseconds ttl, bool shared)
    : state_(std::make_shared<State>(sup, errors, max_bytes, ttl, shared)) {}

// Timers still pending find the state gone (they hold it weakly).
ScratchFiles::~ScratchFiles() = default;

std::size_t ScratchFiles::max_bytes() const { return state_->max_bytes; }

int ScratchFiles::create(fuse_ino_t dir, const std::string& dir_path, std::string_view name, uid_t uid,
                         gid_t gid, mode_t mode, bool writer, Info* out) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  State::Key key{dir, uid, std::string(name)};
  if (s.names.count(key)) return EEXIST;
  if (auto n = s.per_user.find(uid); n != s.per_user.end() && n->second >= kPerUser) return EDQUOT;
  State::Entry e;
  e.info.ino = kScratchInoBit | static_cast<fuse_ino_t>(s.next++);
  e.info.dir = dir;
  e.info.path = join(dir_path, name);
  e.info.uid = uid;
  e.info.gid = gid;
  e.info.mode = mode & 07777;
  e.info.mtime = now_realtime();
  e.name = std::string(name);
  e.open = 1;
  e.writers = writer ? 1 : 0;
  *out = e.info;
  s.names.emplace(std::move(key), e.info.ino);
  ++s.per_user[uid];
  s.files.emplace(e.info.ino, std::move(e));
  return 0;
}

std::optional<ScratchFiles::Info> ScratchFiles::find(fuse_ino_t dir, std::string_view name, uid_t uid) const {
  const State& s = *state_;
  std::lock_guard g(s.mu);
  auto it = s.names.find(State::Key{dir, uid, std::string(name)});
  if (it == s.names.end()) return std::nullopt;
  return s.files.at(it->second).info;
}

std::optional<ScratchFiles::Info> ScratchFiles::stat(fuse_ino_t ino, uid_t uid) const {
  std::optional<Info> i = info(ino);
  if (!i || i->uid != uid) return std::nullopt;
  return i;
}

std::optional<ScratchFiles::Info> ScratchFiles::info(fuse_ino_t ino) const {
  const State& s = *state_;
  std::lock_guard g(s.mu);
  auto it = s.files.find(ino);
  if (it == s.files.end()) return std::nullopt;
  return it->second.info;
}

std::vector<ScratchFiles::Info> ScratchFiles::list(fuse_ino_t dir, uid_t uid) const {
  const State& s = *state_;
  std::vector<Info> out;
  std::lock_guard g(s.mu);
  for (auto it = s.names.lower_bound(State::Key{dir, uid, ""});
       it != s.names.end() && std::get<0>(it->first) == dir && std::get<1>(it->first) == uid; ++it)
    out.push_back(s.files.at(it->second).info);
  return out;
}

bool ScratchFiles::opened(fuse_ino_t ino, bool writer) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  State::Entry* e = s.get(ino);
  if (!e) return false;
  ++e->open;
  if (writer) ++e->writers;
  return true;
}

std::optional<ScratchFiles::Due> ScratchFiles::written(fuse_ino_t ino) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  State::Entry* e = s.get(ino);
  if (!e || e->writers == 0 || --e->writers > 0 || !e->delivery) return std::nullopt;
  e->delivered = e->delivery;
  return Due{std::move(e->delivery), std::move(e->content)};
}

std::shared_ptr<const Delivery> ScratchFiles::delivered(fuse_ino_t ino) const {
  const State& s = *state_;
  std::lock_guard g(s.mu);
  auto it = s.files.find(ino);
  return it == s.files.end() ? nullptr : it->second.delivered;
}

void ScratchFiles::writing(fuse_ino_t ino) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  if (State::Entry* e = s.get(ino)) ++e->writers;
}

void ScratchFiles::closed(fuse_ino_t ino) {
  State& s = *state_;
  std::uint64_t closes = 0;
  {
    std::lock_guard g(s.mu);
    auto it = s.files.find(ino);
    if (it == s.files.end() || it->second.open == 0 || --it->second.open > 0) return;
    if (!it->second.named) {
      s.files.erase(it);  // unlinked while open: now it is gone
      return;
    }
    closes = ++it->second.closes;
  }
  std::weak_ptr<State> weak = state_;
  s.sup.add_timer(sup::Supervisor::Clock::now() + s.ttl, [weak, ino, closes] {
    if (std::shared_ptr<State> st = weak.lock()) st->expire(ino, closes);
  });
}

int ScratchFiles::read(fuse_ino_t ino, std::size_t size, off_t off, std::string* out) const {
  const State& s = *state_;
  std::lock_guard g(s.mu);
  auto it = s.files.find(ino);
  if (it == s.files.end()) return ENOENT;
  const std::string& c = it->second.content;
  out->clear();
  if (off >= 0 && static_cast<std::size_t>(off) < c.size()) *out = c.substr(static_cast<std::size_t>(off), size);
  return 0;
}

int ScratchFiles::write(fuse_ino_t ino, std::string_view data, off_t off) {
  State& s = *state_;
  if (off < 0) return EINVAL;
  std::lock_guard g(s.mu);
  State::Entry* e = s.get(ino);
  if (!e) return ENOENT;
  if (e->delivered) return EIO;  // these bytes would go nowhere
  const std::size_t end = static_cast<std::size_t>(off) + data.size();
  if (end > s.max_bytes) return EFBIG;
  if (e->content.size() < end) e->content.resize(end, '\0');
  e->content.replace(static_cast<std::size_t>(off), data.size(), data);
  e->info.size = static_cast<off_t>(e->content.size());
  e->info.mtime = now_realtime();
  return 0;
}

int ScratchFiles::truncate(fuse_ino_t ino, off_t size) {
  State& s = *state_;
  if (size < 0) return EINVAL;
  std::lock_guard g(s.mu);
  State::Entry* e = s.get(ino);
  if (!e) return ENOENT;
  if (static_cast<std::size_t>(size) > s.max_bytes) return EFBIG;
  e->content.resize(static_cast<std::size_t>(size), '\0');
  e->info.size = size;
  e->info.mtime = now_realtime();
  return 0;
}

int ScratchFiles::set_mode(fuse_ino_t ino, mode_t mode) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  State::Entry* e = s.get(ino);
  if (!e) return ENOENT;
  e->info.mode = mode & 07777;
  return 0;
}

int ScratchFiles::set_mtime(fuse_ino_t ino, const timespec& mtime) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  State::Entry* e = s.get(ino);
  if (!e) return ENOENT;
  e->info.mtime = mtime;
  return 0;
}

int ScratchFiles::remove(fuse_ino_t dir, std::string_view name, uid_t uid) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  auto n = s.names.find(State::Key{dir, uid, std::string(name)});
  if (n == s.names.end()) return ENOENT;
  s.remove(s.files.find(n->second));
  return 0;
}

void ScratchFiles::remove_dir(fuse_ino_t dir) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  // Names sort by folder first: those of `dir` are one run.
  auto n = s.names.lower_bound(State::Key{dir, 0, std::string()});
  while (n != s.names.end() && std::get<0>(n->first) == dir) {
    const fuse_ino_t ino = (n++)->second;  // remove() erases this name
    s.remove(s.files.find(ino));
  }
}

int ScratchFiles::rename(fuse_ino_t ino, fuse_ino_t dir, const std::string& dir_path, std::string_view name,
                         bool no_replace) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  State::Entry* e = s.get(ino);
  if (!e || !e->named) return ENOENT;
  State::Key to{dir, e->info.uid, std::string(name)};
  if (auto n = s.names.find(to); n != s.names.end()) {
    if (n->second == ino) return 0;  // onto itself: nothing to do (rename(2))
    if (no_replace) return EEXIST;
    s.remove(s.files.find(n->second));
    e = s.get(ino);
  }
  s.names.erase(State::Key{e->info.dir, e->info.uid, e->name});
  e->info.dir = dir;
  e->info.path = join(dir_path, name);
  e->name = std::string(name);
  s.names.emplace(std::move(to), ino);
  return 0;
}

std::optional<std::string> ScratchFiles::take(fuse_ino_t ino, std::shared_ptr<const Delivery> later, int* err) {
  State& s = *state_;
  std::lock_guard g(s.mu);
  auto it = s.files.find(ino);
  *err = 0;
  if (it == s.files.end() || !it->second.named) {
    *err = ENOENT;
    return std::nullopt;
  }
  if (it->second.writers > 0) {
    it->second.delivery = std::move(later);
    s.unname(it->second);
    return std::nullopt;
  }
  std::string content = std::move(it->second.content);
  s.remove(it);
  return content;
}

}  // namespace fsd
