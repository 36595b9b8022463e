// rename(2) in the tree. Renaming a scratch file over a writable file of the
// tree (cmd, procs/ID/cmd, stop, signal, ready, steps...) is one write of the
// scratch's whole content to that file followed by a close, through the
// file's own handle as open(2) would make it: the same effect, the same
// errno on refusal (returned by rename), the same line in `errors`. The
// scratch is gone afterwards, whatever the outcome. Either step may be
// parked (stop waits for the end; a start may complete later), so the steps
// are chained by routing the request's replies (route_replies), never by
// waiting. Between scratch names a rename is a plain rename.
#include <cerrno>
#include <fcntl.h>
#include <memory>
#include <sys/stat.h>

#include "fsd/files.hpp"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace fsd {

namespace {

/// One rename over a file of the tree: the target's handle, kept alive
/// until the rename is answered, and what to write to it.
struct WriteAndClose {
  std::unique_ptr<Handle> handle;
  std::string content;
};

void close_step(fuse_req_t req, std::shared_ptr<WriteAndClose> job) {
  Handle* h = job->handle.get();
  // The close's answer is the rename's; the route (and with it the handle) goes then.
  route_replies(req, [req, job](const Reply& r) {
    fuse_reply_err(req, r.type() == Reply::Type::error ? r.err() : 0);
  });
  send_reply(req, h->flush(req));
}

void write_step(fuse_req_t req, std::shared_ptr<WriteAndClose> job) {
  Handle* h = job->handle.get();
  route_replies(req, [req, job](const Reply& r) {
    // A refused write is the rename's errno; there is nothing left to close for.
    if (r.type() == Reply::Type::error) return (void)fuse_reply_err(req, r.err() ? r.err() : EIO);
    if (r.type() != Reply::Type::written || r.count() != job->content.size())
      return (void)fuse_reply_err(req, EIO);
    close_step(req, job);
  });
  send_reply(req, h->write_whole(req, job->content));
}

/// Rename of scratch `src` onto the tree's file `dst`.
Reply onto_tree_file(Filesystem& fs, fuse_req_t req, const Node& src, const Node& dst, unsigned flags,
                     const Requester& who) {
  // coreutils mv tries RENAME_NOREPLACE first and renames plainly on EEXIST.
  if (flags & RENAME_NOREPLACE) return Reply::error(EEXIST);
  const mode_t mode = mode_of(dst.kind);
  if (S_ISDIR(mode)) return Reply::error(EISDIR);
  if (!(mode & 0222)) return Reply::error(EACCES);  // read-only, as an open for writing would be
  std::unique_ptr<Handle> h = open_node(fs, dst, who, O_WRONLY);
  if (!h) return Reply::error(EIO);
  std::optional<std::string> content = fs.scratch().take(src.ino);
  if (!content) return Reply::error(ENOENT);
  auto job = std::make_shared<WriteAndClose>(WriteAndClose{std::move(h), std::move(*content)});
  // Nothing to write (`: > tmp; mv tmp stop`): an open and a close, as for `: > stop`.
  if (job->content.empty()) close_step(req, std::move(job));
  else write_step(req, std::move(job));
  return Reply::parked();
}

}  // namespace

Reply rename_entry(Filesystem& fs, fuse_req_t req, fuse_ino_t parent, std::string_view name,
                   fuse_ino_t newparent, std::string_view newname, unsigned flags) {
  const Requester who = Requester::of(req);
  const sup::Result<Node> from_dir = fs.resolve(parent, who);
  if (!from_dir) return Reply::fail(from_dir.error());
  const sup::Result<Node> to_dir = fs.resolve(newparent, who);
  if (!to_dir) return Reply::fail(to_dir.error());
  const sup::Result<Node> src = lookup(fs, *from_dir, name, who);
  if (!src) return Reply::fail(src.error());
  if (src->kind != Kind::scratch) return Reply::error(EPERM);  // the tree's names are fixed
  if (flags & RENAME_EXCHANGE) return Reply::error(EINVAL);
  const sup::Result<Node> dst = lookup(fs, *to_dir, newname, who);
  if (!dst && dst.error().code == sup::Errc::not_a_directory) return Reply::error(ENOTDIR);
  if (dst && dst->kind != Kind::scratch) return onto_tree_file(fs, req, *src, *dst, flags, who);
  const std::optional<std::string> to_path = scratch_dir_path(*to_dir);
  if (!to_path) return Reply::error(EACCES);
  return Reply::error(fs.scratch().rename(src->ino, to_dir->ino, *to_path, newname, flags & RENAME_NOREPLACE));
}

}  // namespace fsd
