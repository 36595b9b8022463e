#include "supervisor/spare_folders.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "supervisor/files.hpp"

namespace sup {

SpareFolders::SpareFolders(std::string dir, unsigned keep, Later later, Prepare prepare)
    : dir_(std::move(dir)), keep_(keep), later_(std::move(later)), prepare_(std::move(prepare)) {}

SpareFolders::~SpareFolders() {
  std::lock_guard g(mu_);
  for (const std::string& p : ready_) remove_tree(p);
}

int SpareFolders::make(const std::string& path) {
  std::string spare;
  {
    std::lock_guard g(mu_);
    if (!ready_.empty()) {
      spare = std::move(ready_.back());
      ready_.pop_back();
    }
  }
  // NOREPLACE: an existing `path` is EEXIST, as for mkdir (a plain rename
  // would replace an empty folder). On any failure (a spare removed behind
  // our back, say) the mkdir below says what is wrong, if anything is.
  if (!spare.empty() && ::renameat2(AT_FDCWD, spare.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (!spare.empty()) remove_tree(spare);
  return make_empty(path);
}

int SpareFolders::make_empty(const std::string& path) { return ::mkdir(path.c_str(), 0700) == 0 ? 0 : errno; }

namespace {

// Makes `p` and fills it; 0 or an errno (then nothing of it is left).
int make_spare(const std::string& p, const SpareFolders::Prepare& prepare) {
  if (::mkdir(p.c_str(), 0700) != 0) return errno;
  if (!prepare) return 0;
  int e = 0;
  const int dirfd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) e = errno;
  else e = prepare(dirfd);
  if (dirfd >= 0) ::close(dirfd);
  if (e != 0) remove_tree(p);
  return e;
}

}  // namespace

void SpareFolders::refill() {
  std::unique_lock g(mu_);
  refill_posted_ = false;
  if (making_) return;  // the other refill() goes on until there are enough
  making_ = true;
  // A name taken already (a leftover the loader could not remove) is passed
  // by; any other failure (a full disk, say) ends the round: the starts
  // make their own folders meanwhile.
  for (unsigned tries = 0; ready_.size() < keep_ && tries < 2 * keep_; ++tries) {
    const std::string p = dir_ + "/spare-" + std::to_string(next_++);
    g.unlock();
    const int e = make_spare(p, prepare_);
    g.lock();
    if (e == 0) ready_.push_back(p);
    else if (e != EEXIST) break;
  }
  making_ = false;
}

void SpareFolders::refill_later() {
  {
    std::lock_guard g(mu_);
    if (refill_posted_ || ready_.size() >= keep_) return;
    refill_posted_ = true;
  }
  later_([this] { refill(); });
}

std::size_t SpareFolders::ready() const {
  std::lock_guard g(mu_);
  return ready_.size();
}

}  // namespace sup
