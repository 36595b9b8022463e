// Scratch files as the tree shows them: any name the tree does not use, in
// the root or in procs/ID/, can be created (create(2), open with O_CREAT),
// read, written, truncated, listed, stat'ed, removed and renamed by the user
// who created it (ScratchFiles keeps them). Renaming one over a file of the
// tree is a write of its content there (scratch_rename.cpp).
#include <cerrno>
#include <fcntl.h>
#include <mutex>
#include <sys/stat.h>

#include "fsd/files.hpp"
#include "fsd/open_elsewhere.hpp"
#include "fsd/opener_process.hpp"

namespace fsd {

namespace {

/// An open scratch file. One opened for writing writes to it until its
/// writer closes it (the close of the process that opened it or wrote
/// through it, when no other descriptor of that process refers to it:
/// OpenerProcess, open_elsewhere), or until its release; a rename over a
/// file of the tree made meanwhile is delivered then (ScratchFiles::written).
class ScratchHandle : public Handle {
 public:
  /// Counted open by the caller (ScratchFiles::create or opened).
  ScratchHandle(Filesystem& fs, fuse_ino_t ino, bool writer, pid_t opener)
      : fs_(fs), files_(fs.scratch()), ino_(ino), writing_(writer), opener_(opener) {}
  ~ScratchHandle() override {
    if (writing_) files_.written(ino_);  // never released (the mount went away): nothing left to deliver to
    files_.closed(ino_);
  }

  Reply read(fuse_req_t, std::size_t size, off_t off) override {
    std::string bytes;
    if (const int err = files_.read(ino_, size, off, &bytes)) return Reply::error(err);
    return Reply::data(std::move(bytes));
  }

  Reply write(fuse_req_t req, std::string_view data, off_t off) override {
    {
      std::lock_guard g(mu_);
      opener_.wrote(fuse_req_ctx(req)->pid);
      // A child that inherited the descriptor writes after its writer closed it.
      if (!writing_) files_.writing(ino_);
      writing_ = true;
    }
    if (const int err = files_.write(ino_, data, off)) {
      // Delivered at its writer's close (a child that wrote through an
      // inherited descriptor, then exited): these bytes can go nowhere.
      if (const std::shared_ptr<const Delivery> d = files_.delivered(ino_); d && err == EIO)
        fs_.errors().add(d->path, EIO,
                         "written after its scratch file was delivered (renamed onto it, then closed by the "
                         "process that wrote it): these bytes were not taken",
                         "(" + std::to_string(data.size()) + " bytes)", d->id);
      return Reply::error(err);
    }
    return Reply::written(data.size());
  }

  Reply flush(fuse_req_t req) override {
    const pid_t closer = fuse_req_ctx(req)->pid;
    {
      std::lock_guard g(mu_);
      // A child's close of the copy it inherited, or a close of one of
      // several descriptors, is not its writer's close.
      if (!writing_ || !opener_.includes(closer)) return Reply::error(0);
    }
    if (open_elsewhere(closer, "", ino_)) return Reply::error(0);
    return done_writing(req);
  }

  Reply release(fuse_req_t req) override { return done_writing(req); }

 private:
  /// This open file no longer writes; a rename waiting for it is delivered on `req`.
  Reply done_writing(fuse_req_t req) {
    std::optional<ScratchFiles::Due> due;
    {
      std::lock_guard g(mu_);
      if (!writing_) return Reply::error(0);
      writing_ = false;
      due = files_.written(ino_);
    }
    if (!due) return Reply::error(0);
    return deliver(fs_, req, *due->delivery, std::move(due->content));
  }

  Filesystem& fs_;
  ScratchFiles& files_;
  const fuse_ino_t ino_;
  std::mutex mu_;
  bool writing_;          // guarded by mu_: counted among the scratch's writers
  OpenerProcess opener_;  // guarded by mu_: whose close ends the writing
};

}  // namespace

std::optional<std::string> scratch_dir_path(const Node& dir) {
  if (dir.kind == Kind::root) return std::string();
  if (dir.kind == Kind::record_dir) return "procs/" + dir.id();
  return std::nullopt;  // procs/ and logs/ hold only what the supervisor has
}

sup::Result<Node> lookup_scratch(Filesystem& fs, const Node& dir, std::string_view name, const Requester& who) {
  const std::optional<ScratchFiles::Info> i = fs.scratch().find(dir.ino, name, who.uid);
  if (!i) return sup::Error{sup::Errc::not_found, "no such file"};
  return Node{Kind::scratch, i->ino, std::nullopt};
}

std::vector<DirEntry> list_scratch(Filesystem& fs, const Node& dir, const Requester& who) {
  std::vector<DirEntry> out;
  for (const ScratchFiles::Info& i : fs.scratch().list(dir.ino, who.uid)) {
    const std::size_t slash = i.path.rfind('/');
    out.push_back({slash == std::string::npos ? i.path : i.path.substr(slash + 1), i.ino, S_IFREG | i.mode});
  }
  return out;
}

struct stat scratch_attr(Filesystem& fs, const Node& node) {
  struct stat st {};
  st.st_ino = node.ino;
  st.st_nlink = 1;
  st.st_blksize = 4096;
  const std::optional<ScratchFiles::Info> i = fs.scratch().info(node.ino);
  if (!i) {
    st.st_mode = S_IFREG;
    return st;
  }
  st.st_mode = S_IFREG | i->mode;
  st.st_uid = i->uid;
  st.st_gid = i->gid;
  st.st_size = i->size;
  st.st_blocks = (i->size + 511) / 512;
  st.st_atim = st.st_mtim = st.st_ctim = i->mtime;
  return st;
}

std::unique_ptr<Handle> open_scratch(Filesystem& fs, const Node& node, const OpenRequest& req) {
  const int flags = req.flags;
  const bool writer = (flags & O_ACCMODE) != O_RDONLY;
  if (!fs.scratch().opened(node.ino, writer)) return nullptr;
  auto h = std::make_unique<ScratchHandle>(fs, node.ino, writer, req.who.pid);
  // libfuse asks for atomic O_TRUNC: the truncation is ours to do at open.
  if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) fs.scratch().truncate(node.ino, 0);
  return h;
}

int create_scratch(Filesystem& fs, const Node& dir, std::string_view name, mode_t mode, int flags,
                   const Requester& who, Node* node, std::unique_ptr<Handle>* h) {
  const std::optional<std::string> dir_path = scratch_dir_path(dir);
  if (!dir_path) return EACCES;
  if (const sup::Result<Node> there = lookup(fs, dir, name, who)) {
    // The kernel looks a name up before it creates it; a create that
    // finds one anyway lost a race, and is an open of it unless O_EXCL.
    if ((flags & O_EXCL) || there->kind != Kind::scratch) return EEXIST;
    *node = *there;
    *h = open_scratch(fs, *there, OpenRequest{who, flags});
    return *h ? 0 : ENOENT;
  }
  ScratchFiles::Info info;
  const bool writer = (flags & O_ACCMODE) != O_RDONLY;
  if (const int err = fs.scratch().create(dir.ino, *dir_path, name, who.uid, who.gid, mode & 0777, writer, &info)) {
    const std::string path = dir_path->empty() ? std::string(name) : *dir_path + "/" + std::string(name);
    fs.errors().add(path + " (create)", err,
                    err == EDQUOT ? "at most " + std::to_string(ScratchFiles::kPerUser) +
                                        " scratch files per user at once: rename or remove some"
                                  : "cannot create the scratch file",
                    "", dir.record ? dir.id() : "");
    return err;
  }
  *node = Node{Kind::scratch, info.ino, std::nullopt};
  *h = std::make_unique<ScratchHandle>(fs, info.ino, writer, who.pid);  // create() counted this open
  return 0;
}

int setattr_scratch(Filesystem& fs, const Node& node, const struct stat& attr, int to_set) {
  ScratchFiles& files = fs.scratch();
  const std::optional<ScratchFiles::Info> i = files.info(node.ino);
  if (!i) return ENOENT;
  // Copying tools restore the owner they read back: that is no change.
  if (((to_set & FUSE_SET_ATTR_UID) && attr.st_uid != i->uid) ||
      ((to_set & FUSE_SET_ATTR_GID) && attr.st_gid != i->gid))
    return EPERM;
  if (to_set & FUSE_SET_ATTR_SIZE)
    if (const int err = files.truncate(node.ino, attr.st_size)) return err;
  if (to_set & FUSE_SET_ATTR_MODE) files.set_mode(node.ino, attr.st_mode);
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    files.set_mtime(node.ino, now);
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    files.set_mtime(node.ino, attr.st_mtim);
  }
  return 0;
}

int unlink_entry(Filesystem& fs, const Node& dir, std::string_view name, const Requester& who) {
  const sup::Result<Node> node = lookup(fs, dir, name, who);
  if (!node) return ENOENT;
  if (node->kind != Kind::scratch) return EPERM;  // the tree's own files stay
  return fs.scratch().remove(dir.ino, name, who.uid);
}

}  // namespace fsd
