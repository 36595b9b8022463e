#pragma once
// Scratch files: regular files a writer creates beside a file of the tree
// (an agent's `.cmd.<hex>.tmp`, `sed -i`'s temporary file, Python's
// mkstemp) and then renames over it. They live in the daemon's memory.
//
// Each belongs to the uid that created it and is seen by that uid alone:
// names are per user (two users may each have `.cmd.tmp` in one folder),
// so lookups, listings and opens by anyone else find nothing. At most
// kPerUser per user (one more: EDQUOT), each at most `max_bytes` (EFBIG).
// Inodes are kScratchInoBit | a counter, never reused: a removed scratch's
// inode is simply unknown (ENOENT).
//
// One that nobody renamed `ttl` after its last close is removed, with a line
// in `errors` naming it (a typo such as `procs/ID/sginal` leaves a trace).
//
// One renamed over a file of the tree while open for writing loses its name
// at once and keeps what the rename is to do with it (a Delivery, opaque
// here) until its last writer is done writing (written()): as on any file
// system, what is written until then lands in the renamed file.
//
// Thread-safety: every method may be called from any thread. Errors are
// errno values: this table exists for the FUSE side only.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include <fuse_lowlevel.h>

namespace sup {
class Supervisor;
}

namespace fsd {

class ErrorLog;
struct Delivery;  // what a rename over a file of the tree does with the content (files.hpp)

class ScratchFiles {
 public:
  static constexpr std::size_t kPerUser = 64;

  /// What stat shows of a scratch file.
  struct Info {
    fuse_ino_t ino = 0;
    fuse_ino_t dir = 0;  ///< inode of the folder that holds it
    std::string path;    ///< relative to the mount point, for `errors`
    uid_t uid = 0;
    gid_t gid = 0;
    mode_t mode = 0600;  ///< permission bits
    off_t size = 0;
    timespec mtime{};
  };

  /// `shared`: users other than the mounter use the tree (allow_other), so
  /// `errors`, which they all read, never shows what a scratch file held.
  ScratchFiles(sup::Supervisor& sup, ErrorLog& errors, std::size_t max_bytes, std::chrono::milliseconds ttl,
               bool shared);
  ~ScratchFiles();
  ScratchFiles(const ScratchFiles&) = delete;
  ScratchFiles& operator=(const ScratchFiles&) = delete;

  std::size_t max_bytes() const;

  /// A new, empty scratch `name` in folder `dir` (whose path is `dir_path`,
  /// "" for the root), owned by uid/gid, counted as open once, for writing
  /// if `writer` (the caller calls closed() when that open file is
  /// released). EEXIST when the user has one of that name there, EDQUOT
  /// past kPerUser.
  int create(fuse_ino_t dir, const std::string& dir_path, std::string_view name, uid_t uid, gid_t gid,
             mode_t mode, bool writer, Info* out);
  /// `uid`'s scratch `name` in `dir`.
  std::optional<Info> find(fuse_ino_t dir, std::string_view name, uid_t uid) const;
  /// The scratch of inode `ino`, if it still exists and belongs to `uid`.
  std::optional<Info> stat(fuse_ino_t ino, uid_t uid) const;
  /// The scratch of inode `ino`, whoever owns it (the caller checked).
  std::optional<Info> info(fuse_ino_t ino) const;
  /// `uid`'s scratch files in `dir` (name and inode), by name.
  std::vector<Info> list(fuse_ino_t dir, uid_t uid) const;

  /// One more open file of `ino`, writing to it if `writer`; false when it is gone.
  bool opened(fuse_ino_t ino, bool writer);
  /// One open file of `ino` fewer; the last starts its time to live.
  void closed(fuse_ino_t ino);
  /// An open file of `ino` writes to it again after written().
  void writing(fuse_ino_t ino);
  /// A delivery and the content it delivers.
  struct Due {
    std::shared_ptr<const Delivery> delivery;
    std::string content;
  };
  /// An open file of `ino` that writes to it is done writing (its writer
  /// closed it): when it was the last and a rename over a file of the tree
  /// waits for it, that rename's delivery and the whole content.
  std::optional<Due> written(fuse_ino_t ino);
  /// The delivery that took the content, once made (then writes are EIO).
  std::shared_ptr<const Delivery> delivered(fuse_ino_t ino) const;

  /// Bytes [off, off+size) of the content; ENOENT when gone.
  int read(fuse_ino_t ino, std::size_t size, off_t off, std::string* out) const;
  /// Writes at `off` (zero-filling a hole). EFBIG past max_bytes; EIO, with
  /// a line in `errors`, once a rename's delivery took the content.
  int write(fuse_ino_t ino, std::string_view data, off_t off);
  /// Sets the size (truncate, open with O_TRUNC). EFBIG past max_bytes.
  int truncate(fuse_ino_t ino, off_t size);
  /// chmod and utimens; `mtime` null: keep it.
  int set_mode(fuse_ino_t ino, mode_t mode);
  int set_mtime(fuse_ino_t ino, const timespec& mtime);

  /// unlink: ENOENT when `uid` has no such scratch. One still open lives on,
  /// nameless, until its last close (as on any file system); so does one a
  /// rename replaces or takes.
  int remove(fuse_ino_t dir, std::string_view name, uid_t uid);
  /// Removes every scratch in `dir`, whoever made it (the folder was removed).
  void remove_dir(fuse_ino_t dir);
  /// rename of scratch `ino` to `name` in `dir` (path `dir_path`), replacing
  /// a scratch of that user there, unless `no_replace` (then EEXIST).
  int rename(fuse_ino_t ino, fuse_ino_t dir, const std::string& dir_path, std::string_view name,
             bool no_replace);
  /// A rename of scratch `ino` over a file of the tree: its name goes.
  /// Not open for writing, it goes too, and its content is returned. Open
  /// for writing: nullopt, and `later` waits for written() of its last
  /// writer. ENOENT (nullopt, `*err`) when it is gone.
  std::optional<std::string> take(fuse_ino_t ino, std::shared_ptr<const Delivery> later, int* err);

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the timers, which may outlive nothing but must not crash
};

}  // namespace fsd
