// Fills fuse_lowlevel_ops. Decodes, calls, replies: what a file does is in
// its own *_file.cpp; names and attributes are in tree.cpp.
#include "fsd/dispatcher.hpp"

#include <cerrno>
#include <fcntl.h>
#include <exception>
#include <memory>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fuse_log.h>

#include "fsd/dir_handle.hpp"
#include "fsd/files.hpp"

namespace fsd {

namespace {

Filesystem& fs_of(fuse_req_t req) { return **static_cast<Filesystem**>(fuse_req_userdata(req)); }

/// Runs `body`; anything it throws becomes a log line and EIO.
template <class Body>
void guarded(fuse_req_t req, const char* op, Body&& body) noexcept {
  try {
    body();
  } catch (const std::exception& e) {
    fuse_log(FUSE_LOG_ERR, "sbxfs: %s: %s\n", op, e.what());
    send_reply(req, Reply::error(EIO));
  } catch (...) {
    fuse_log(FUSE_LOG_ERR, "sbxfs: %s: unknown exception\n", op);
    send_reply(req, Reply::error(EIO));
  }
}

void reply_error(fuse_req_t req, const sup::Error& e) { send_reply(req, Reply::fail(e)); }

/// The open file's handle, held while the handler runs (see OpenHandles);
/// null after replying EBADF.
std::shared_ptr<Handle> held(fuse_req_t req, const fuse_file_info* fi) {
  std::shared_ptr<Handle> h = fi ? fs_of(req).handles().use(fi->fh) : nullptr;
  if (!h) fuse_reply_err(req, EBADF);
  return h;
}

/// Nonzero when the reply did not reach the kernel (an interrupted request).
int reply_entry(fuse_req_t req, Filesystem& fs, const Node& node) {
  fuse_entry_param e{};
  e.ino = node.ino;
  e.attr = attr_of(fs, node, nullptr);
  e.entry_timeout = timeout_of(node);
  e.attr_timeout = attr_timeout_of(fs, node);
  return fuse_reply_entry(req, &e);
}

/// Whether `who` may write a file of attributes `st`, by its permission bits.
bool may_write(const struct stat& st, const Requester& who) {
  if (who.uid == 0) return true;
  if (who.uid == st.st_uid) return st.st_mode & S_IWUSR;
  if (who.gid == st.st_gid) return st.st_mode & S_IWGRP;
  return st.st_mode & S_IWOTH;
}

/// setattr of a file of the tree: times are accepted and change nothing;
/// so is truncation (open with O_TRUNC, `truncate`) of a writable file,
/// and, by a user who may write it, any mode or owner (copying tools set
/// the source's after they wrote: `cp -p`, Python's shutil.copy): the
/// tree's stay, as vfat's `quiet` has it. Of the other files and of the
/// folders, only a mode or owner set to what it is (editors).
int tree_setattr_errno(Filesystem& fs, const Node& node, const struct stat& attr, int to_set,
                       const Requester& who) {
  const struct stat now = attr_of(fs, node, nullptr);
  if (S_ISREG(now.st_mode) && (now.st_mode & 0222) && may_write(now, who)) return 0;
  if ((to_set & FUSE_SET_ATTR_MODE) && (attr.st_mode & 07777) != (now.st_mode & 07777)) return EPERM;
  if (((to_set & FUSE_SET_ATTR_UID) && attr.st_uid != now.st_uid) ||
      ((to_set & FUSE_SET_ATTR_GID) && attr.st_gid != now.st_gid))
    return EPERM;
  if ((to_set & FUSE_SET_ATTR_SIZE) && !(now.st_mode & 0222)) return EACCES;
  return 0;
}

/// `name` in directory `dir`, as `errors` names paths.
std::string path_in(const Node& dir, std::string_view name) {
  switch (dir.kind) {
    case Kind::procs: return "procs/" + std::string(name);
    case Kind::logs: return "logs/" + std::string(name);
    case Kind::record_dir: return "procs/" + dir.id() + "/" + std::string(name);
    default: return std::string(name);
  }
}

/// EPERM for a folder made or removed outside procs/, with its line in `errors`.
void refuse_folder(Filesystem& fs, fuse_req_t req, const Node& dir, std::string_view name, const char* why) {
  fs.errors().add(path_in(dir, name), EPERM, why, "", dir.record ? dir.id() : "");
  fuse_reply_err(req, EPERM);
}

bool wants_write(int flags) { return (flags & O_ACCMODE) != O_RDONLY; }
bool wants_read(int flags) { return (flags & O_ACCMODE) != O_WRONLY; }

}  // namespace

std::unique_ptr<Handle> open_node(Filesystem& fs, const Node& node, const Requester& who, int flags) {
  const Opener open = tree_file(node.kind).open;
  return open ? open(fs, node, OpenRequest{who, flags}) : nullptr;
}

namespace {

void op_lookup(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  guarded(req, "lookup", [&] {
    Filesystem& fs = fs_of(req);
    const Requester who = Requester::of(req);
    const sup::Result<Node> dir = fs.resolve(parent, who);
    if (!dir) return reply_error(req, dir.error());
    const sup::Result<Node> node = lookup(fs, *dir, name, who);
    // A miss is a plain ENOENT, not a cached negative entry, so `mkdir` right
    // after a failed lookup reaches us (a cached entry would make the kernel
    // answer EEXIST or ENOENT itself, and never send the MKDIR).
    if (!node) return reply_error(req, node.error());
    // A lookup the kernel never got is one it will never forget.
    if (reply_entry(req, fs, *node) != 0) fs.param_nodes().forget(node->ino, 1);
  });
}

// The kernel lets go of inodes it looked up. Only names with parameters
// have entries to drop (ParamNodes); every other inode is computed.
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) noexcept {
  fs_of(req).param_nodes().forget(ino, nlookup);
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) noexcept {
  ParamNodes& nodes = fs_of(req).param_nodes();
  for (size_t i = 0; i < count; ++i) nodes.forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  guarded(req, "getattr", [&] {
    Filesystem& fs = fs_of(req);
    const sup::Result<Node> node = fs.resolve(ino, Requester::of(req));
    if (!node && node.error().code == sup::Errc::not_found) {
      // A file of a removed record, open still: what it reads, as of a
      // file unlinked while open. The kernel names the open file before a
      // read past the size it knows; fstat(2) gives the inode alone.
      struct stat st {};
      const std::shared_ptr<Handle> h =
          fi ? fs.handles().use(fi->fh) : fs.handles().any_on(ino, Requester::of(req).uid);
      if (h && h->fstat(&st)) {
        st.st_ino = ino;
        st.st_mode = S_IFREG | 0444;
        st.st_nlink = 0;
        st.st_uid = ::getuid();
        st.st_gid = ::getgid();
        return (void)fuse_reply_attr(req, &st, 0.0);
      }
    }
    if (!node) return reply_error(req, node.error());
    // fstat(2) comes without the open file: a log view's is found by the
    // asker's process (past log_max a reader that kept up is further on
    // than the file a new reader gets; tail -f takes a smaller size as the
    // file truncated). A log view's attributes are never cached, so each
    // asker is asked for.
    std::shared_ptr<Handle> open;
    if (fi) open = fs.handles().use(fi->fh);
    else if (tree_file(node->kind).size == Size::backing) open = fs.handles().opened_by(ino, fuse_req_ctx(req)->pid);
    const struct stat st = attr_of(fs, *node, open.get());
    fuse_reply_attr(req, &st, attr_timeout_of(fs, *node));
  });
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi) noexcept {
  guarded(req, "setattr", [&] {
    Filesystem& fs = fs_of(req);
    const Requester who = Requester::of(req);
    const sup::Result<Node> node = fs.resolve(ino, who);
    if (!node) return reply_error(req, node.error());
    if (node->kind == Kind::scratch) {
      if (const int err = setattr_scratch(fs, *node, *attr, to_set)) return (void)fuse_reply_err(req, err);
    } else if (const int err = tree_setattr_errno(fs, *node, *attr, to_set, who)) {
      return (void)fuse_reply_err(req, err);
    }
    const struct stat st = attr_of(fs, *node, fi ? fs.handles().use(fi->fh).get() : nullptr);
    fuse_reply_attr(req, &st, attr_timeout_of(fs, *node));
  });
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t) noexcept {
  guarded(req, "mkdir", [&] {
    Filesystem& fs = fs_of(req);
    const Requester who = Requester::of(req);
    const sup::Result<Node> dir = fs.resolve(parent, who);
    if (!dir) return reply_error(req, dir.error());
    if (dir->kind != Kind::procs)
      return refuse_folder(fs, req, *dir, name, "a folder is made only in procs/ (a named slot: mkdir procs/NAME)");
    const sup::Result<Node> node = make_slot(fs, name, who);
    if (!node) return reply_error(req, node.error());
    reply_entry(req, fs, *node);
  });
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  guarded(req, "rmdir", [&] {
    Filesystem& fs = fs_of(req);
    const Requester who = Requester::of(req);
    const sup::Result<Node> dir = fs.resolve(parent, who);
    if (!dir) return reply_error(req, dir.error());
    if (dir->kind != Kind::procs)
      return refuse_folder(fs, req, *dir, name, "only a command's folder in procs/ can be removed (rmdir procs/ID)");
    const sup::Status st = remove_record(fs, name, who);
    send_reply(req, st ? Reply::error(0) : Reply::fail(st.error()));
  });
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  guarded(req, "unlink", [&] {
    Filesystem& fs = fs_of(req);
    const Requester who = Requester::of(req);
    const sup::Result<Node> dir = fs.resolve(parent, who);
    if (!dir) return reply_error(req, dir.error());
    fuse_reply_err(req, unlink_entry(fs, *dir, name, who));
  });
}

void op_create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi) noexcept {
  guarded(req, "create", [&] {
    Filesystem& fs = fs_of(req);
    const Requester who = Requester::of(req);
    const sup::Result<Node> dir = fs.resolve(parent, who);
    if (!dir) return reply_error(req, dir.error());
    Node node{Kind::scratch, 0, std::nullopt};
    std::unique_ptr<Handle> h;
    if (const int err = create_scratch(fs, *dir, name, mode, fi->flags, who, &node, &h))
      return (void)fuse_reply_err(req, err);
    fuse_entry_param e{};
    e.ino = node.ino;
    e.attr = attr_of(fs, node, nullptr);
    e.entry_timeout = timeout_of(node);
    e.attr_timeout = attr_timeout_of(fs, node);
    fi->direct_io = 1;
    fi->keep_cache = 0;
    fi->fh = fs.handles().keep(std::move(h), node.ino, who.uid);
    if (fuse_reply_create(req, &e, fi) != 0) fs.handles().drop(fi->fh);  // interrupted: no release follows
  });
}

void op_rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
               unsigned int flags) noexcept {
  guarded(req, "rename", [&] { send_reply(req, rename_entry(fs_of(req), req, parent, name, newparent, newname, flags)); });
}

// Only create(2) makes files here (scratch files): no links, devices,
// FIFOs or symbolic links, as for any file that cannot be created.
void op_symlink(fuse_req_t req, const char*, fuse_ino_t, const char*) noexcept { fuse_reply_err(req, EACCES); }
void op_mknod(fuse_req_t req, fuse_ino_t, const char*, mode_t, dev_t) noexcept { fuse_reply_err(req, EACCES); }
void op_link(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) noexcept { fuse_reply_err(req, EACCES); }

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  guarded(req, "open", [&] {
    Filesystem& fs = fs_of(req);
    Requester who = Requester::of(req);
    const sup::Result<Node> node = fs.resolve(ino, who);
    if (!node) return reply_error(req, node.error());
    const TreeFile& row = tree_file(node->kind);
    if (row.reads_client) who.load_client();  // once per open, not per read
    const mode_t mode = row.mode;
    if (S_ISDIR(mode)) return (void)fuse_reply_err(req, EISDIR);
    // O_TRUNC truncates, whatever the access mode: as truncate(2) on a
    // file that cannot be written, EACCES.
    if (((wants_write(fi->flags) || (fi->flags & O_TRUNC)) && !(mode & 0222)) ||
        (wants_read(fi->flags) && !(mode & 0444)))
      return (void)fuse_reply_err(req, EACCES);
    std::unique_ptr<Handle> h = open_node(fs, *node, who, fi->flags);
    if (!h) return (void)fuse_reply_err(req, EIO);
    // Every file is direct_io: contents change behind the kernel's back and
    // a blocking read must reach us, interruptible (through the page cache a
    // read becomes a readahead request: no INTERRUPT is sent for it). But an
    // ended command's output no longer changes: the kernel keeps it.
    const bool cached = fs.ended_output().allow(*node);
    fi->direct_io = !cached;
    fi->keep_cache = cached;
    // Nothing happens at a reader's close: spare it the FLUSH round trip,
    // which would queue behind every other request of the mount.
    fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
    fi->fh = fs.handles().keep(std::move(h), ino, who.uid, who.pid);
    if (fuse_reply_open(req, fi) != 0) fs.handles().drop(fi->fh);  // interrupted open: no release follows
  });
}

void op_read(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) noexcept {
  guarded(req, "read", [&] {
    const std::shared_ptr<Handle> h = held(req, fi);
    if (!h) return;
    // fi->flags are the file's flags at this read (fcntl may have changed them).
    if ((fi->flags & O_NONBLOCK) && h->would_block()) {
      fuse_reply_err(req, EAGAIN);
      return;
    }
    send_reply(req, h->read(req, size, off));
  });
}

void op_write(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off,
              fuse_file_info* fi) noexcept {
  guarded(req, "write",
          [&] {
            const std::shared_ptr<Handle> h = held(req, fi);
            if (!h) return;
            const std::string_view data(buf, size);
            // fi->flags are the file's flags at this write, as for a read.
            send_reply(req, (fi->flags & O_NONBLOCK) ? h->write_nonblocking(req, data, off) : h->write(req, data, off));
          });
}

void op_flush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) noexcept {
  guarded(req, "flush", [&] {
    if (const std::shared_ptr<Handle> h = held(req, fi)) send_reply(req, h->flush(req));
  });
}

void op_release(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) noexcept {
  guarded(req, "release", [&] {
    // Asynchronous, its errors lost: only a scratch renamed while written
    // to acts here, when no close of its writers did (Handle::release).
    Filesystem& fs = fs_of(req);
    const std::shared_ptr<Handle> h = fs.handles().use(fi->fh);
    fs.handles().drop(fi->fh);
    send_reply(req, h ? h->release(req) : Reply::error(0));
  });
}

void op_poll(fuse_req_t req, fuse_ino_t, fuse_file_info* fi, fuse_pollhandle* ph) noexcept {
  guarded(req, "poll", [&] {
    const unsigned events = fi->poll_events ? fi->poll_events : (POLLIN | POLLOUT);
    if (const std::shared_ptr<Handle> h = held(req, fi)) send_reply(req, h->poll(req, ph, events));
  });
}

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  guarded(req, "opendir", [&] {
    Filesystem& fs = fs_of(req);
    const Requester who = Requester::of(req);
    const sup::Result<Node> node = fs.resolve(ino, who);
    if (!node) return reply_error(req, node.error());
    sup::Result<std::unique_ptr<DirHandle>> dir = DirHandle::open(fs, *node, who, fi);
    if (!dir) return reply_error(req, dir.error());
    fi->fh = fs.handles().keep(std::move(dir.value()), ino, who.uid);
    if (fuse_reply_open(req, fi) != 0) fs.handles().drop(fi->fh);
  });
}

void op_readdir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) noexcept {
  guarded(req, "readdir", [&] {
    const std::shared_ptr<Handle> held_dir = held(req, fi);
    if (!held_dir) return;
    send_reply(req, static_cast<DirHandle*>(held_dir.get())->list(req, size, off));
  });
}

void op_releasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) noexcept {
  fs_of(req).handles().drop(fi->fh);
  fuse_reply_err(req, 0);
}

void op_init(void*, fuse_conn_info* conn) noexcept {
  // Replies from a file (Reply::file, the log views) are spliced from it
  // into /dev/fuse instead of copied through a buffer of ours.
  if (conn->capable & FUSE_CAP_SPLICE_WRITE) conn->want |= FUSE_CAP_SPLICE_WRITE;
  conn->max_read = kMaxRead;  // as the mount was told (options.cpp): libfuse checks they agree
}

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops ops{};
  ops.init = op_init;
  ops.lookup = op_lookup;
  ops.forget = op_forget;
  ops.forget_multi = op_forget_multi;
  ops.getattr = op_getattr;
  ops.setattr = op_setattr;
  ops.mkdir = op_mkdir;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.create = op_create;
  ops.rename = op_rename;
  ops.symlink = op_symlink;
  ops.mknod = op_mknod;
  ops.link = op_link;
  ops.open = op_open;
  ops.read = op_read;
  ops.write = op_write;
  ops.flush = op_flush;
  ops.release = op_release;
  ops.opendir = op_opendir;
  ops.readdir = op_readdir;
  ops.releasedir = op_releasedir;
  ops.poll = op_poll;
  return ops;
}

}  // namespace

const fuse_lowlevel_ops& lowlevel_ops() {
  static const fuse_lowlevel_ops ops = make_ops();
  return ops;
}

}  // namespace fsd
