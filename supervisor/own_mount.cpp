#include "supervisor/own_mount.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace sup {

namespace {

bool at_or_below(const std::string& path, const std::string& top) {
  return path == top || (path.starts_with(top) && (top == "/" || path[top.size()] == '/'));
}

/// A mount point as /proc/self/mountinfo writes it: space, tab, newline
/// and backslash as \ooo.
std::string unescape_mount_path(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isdigit(static_cast<unsigned char>(s[i + 2])) && std::isdigit(static_cast<unsigned char>(s[i + 3]))) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

OwnMount::OwnMount(const std::string& mount_point) : point_(mount_point) {
  const std::filesystem::path p(mount_point);
  if (!p.has_parent_path() || p == p.root_path()) return;
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::canonical(p.parent_path(), ec);
  if (!ec) point_ = (parent / p.filename()).string();
}

std::optional<std::string> OwnMount::outside(const std::string& path) const {
  if (point_.empty()) return path;
  std::vector<std::string> avoid;
  {
    std::lock_guard g(points_->mu);
    const auto now = std::chrono::steady_clock::now();
    if (points_->list.empty() || now - points_->read_at > std::chrono::seconds(2)) {
      points_->list = points_now();
      points_->read_at = now;
    }
    avoid = points_->list;
  }
  return resolve_outside(path, avoid);
}

std::vector<std::string> OwnMount::points_now() const {
  if (point_.empty()) return {};
  std::vector<std::string> out = {point_};
  std::ifstream in("/proc/self/mountinfo");
  std::vector<std::pair<std::string, std::string>> mounts;  // (major:minor, mount point)
  std::string device;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point;
    if (!(f >> id >> parent >> dev >> root >> point)) continue;
    point = unescape_mount_path(point);
    if (point == point_) device = dev;  // the last one listed is on top
    mounts.emplace_back(dev, point);
  }
  for (const auto& [dev, point] : mounts)
    if (!device.empty() && dev == device && point != point_) out.push_back(point);
  return out;
}

std::optional<std::string> OwnMount::resolve_outside(const std::string& path, const std::vector<std::string>& avoid) {
  std::deque<std::string> names;
  auto push_front_path = [&names](const std::string& p) {
    std::vector<std::string> parts;
    for (std::size_t at = 0; at <= p.size();) {
      const std::size_t slash = std::min(p.find('/', at), p.size());
      if (slash > at) parts.push_back(p.substr(at, slash - at));
      at = slash + 1;
    }
    names.insert(names.begin(), parts.begin(), parts.end());
  };
  auto avoided = [&avoid](const std::string& p) {
    return std::any_of(avoid.begin(), avoid.end(), [&p](const std::string& a) { return at_or_below(p, a); });
  };
  push_front_path(path);
  std::string here = "/";
  if (avoided(here)) return std::nullopt;
  for (int links = 0; !names.empty();) {
    const std::string name = names.front();
    names.pop_front();
    if (name == ".") continue;
    if (name == "..") {
      here = here.substr(0, std::max<std::size_t>(1, here.rfind('/')));
      continue;
    }
    const std::string next = here == "/" ? "/" + name : here + "/" + name;
    if (avoided(next)) return std::nullopt;
    char target[4096];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof target);
    if (n <= 0 || static_cast<std::size_t>(n) >= sizeof target) {
      here = next;  // no link (or unreadable)
      continue;
    }
    if (++links > 40) return path;  // ELOOP: whoever opens it says so
    // /proc/PID/cwd, root, fd/N...: not where their text says.
    if (next.starts_with("/proc/") && next.find('/', 6) != std::string::npos) return std::nullopt;
    const std::string to(target, static_cast<std::size_t>(n));
    if (to.starts_with('/')) here = "/";
    push_front_path(to);
  }
  return here;
}

}  // namespace sup
