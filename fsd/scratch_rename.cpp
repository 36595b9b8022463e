// rename(2) in the tree. Renaming a scratch file over a writable file of the
// tree (cmd, procs/ID/cmd, stop, signal, ready, steps...) is one write of the
// scratch's whole content to that file followed by a close, through the
// file's own handle as open(2) would make it: the same effect, the same
// errno on refusal (returned by rename), the same line in `errors`. The
// scratch is gone afterwards, whatever the outcome. Either step may be
// parked (stop waits for the end; a start may complete later), so the steps
// are chained by routing the request's replies (route_replies), never by
// waiting. Between scratch names a rename is a plain rename.
//
// A scratch still open for writing (a writer that renames before it
// closes: Python's NamedTemporaryFile + os.replace in its `with`) is
// renamed at once, and the write and close come at its last writer's
// close (deliver()), with what was written by then; a refusal then has
// only `errors` to go to. The rename never waits on the writer.
#include <cerrno>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <sys/stat.h>

#include "fsd/errno_map.hpp"
#include "fsd/files.hpp"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

namespace fsd {

namespace {

/// One write and close of a file of the tree for `req` (a rename, or the
/// close of a scratch renamed while written to): the target's handle, kept
/// alive until `req` is answered, what to write to it, and what to do with
/// the outcome (0 or an errno), which answers `req`.
struct WriteAndClose {
  std::unique_ptr<Handle> handle;
  std::string content;
  std::function<void(int err)> done;
};

void close_step(fuse_req_t req, std::shared_ptr<WriteAndClose> job) {
  Handle* h = job->handle.get();
  // The close's answer is the outcome; the route (and with it the handle) goes then.
  route_replies(req, [job](const Reply& r) { job->done(r.type() == Reply::Type::error ? r.err() : 0); });
  send_reply(req, h->flush(req));
}

void write_step(fuse_req_t req, std::shared_ptr<WriteAndClose> job) {
  Handle* h = job->handle.get();
  route_replies(req, [req, job](const Reply& r) {
    // A refused write is the outcome; there is nothing left to close for.
    if (r.type() == Reply::Type::error) return job->done(r.err() ? r.err() : EIO);
    if (r.type() != Reply::Type::written || r.count() != job->content.size()) return job->done(EIO);
    close_step(req, job);
  });
  send_reply(req, h->write_whole(req, job->content));
}

/// Writes and closes; `job->done` answers `req`.
Reply write_and_close(fuse_req_t req, std::shared_ptr<WriteAndClose> job) {
  job->handle->close_as_one();
  // Nothing to write (`: > tmp; mv tmp stop`): an open and a close, as for `: > stop`.
  if (job->content.empty()) close_step(req, std::move(job));
  else write_step(req, std::move(job));
  return Reply::parked();
}

/// Rename of scratch `src` onto the tree's file `dst`, named `dst_path`.
Reply onto_tree_file(Filesystem& fs, fuse_req_t req, const Node& src, const Node& dst, std::string dst_path,
                     unsigned flags, const Requester& who) {
  // coreutils mv tries RENAME_NOREPLACE first and renames plainly on EEXIST.
  if (flags & RENAME_NOREPLACE) return Reply::error(EEXIST);
  const mode_t mode = mode_of(dst.kind);
  if (S_ISDIR(mode)) return Reply::error(EISDIR);
  if (!(mode & 0222)) return Reply::error(EACCES);  // read-only, as an open for writing would be
  std::unique_ptr<Handle> h = open_node(fs, dst, who, O_WRONLY);
  if (!h) return Reply::error(EIO);
  auto later = std::make_shared<const Delivery>(
      Delivery{dst.ino, std::move(dst_path), dst.record ? dst.id() : "", who});
  int err = 0;
  std::optional<std::string> content = fs.scratch().take(src.ino, std::move(later), &err);
  if (err) return Reply::error(err);
  if (!content) return Reply::error(0);  // still written to: delivered at its last writer's close
  return write_and_close(req, std::make_shared<WriteAndClose>(WriteAndClose{
                                  std::move(h), std::move(*content), [req](int e) { fuse_reply_err(req, e); }}));
}

}  // namespace

Reply deliver(Filesystem& fs, fuse_req_t req, const Delivery& d, std::string content) {
  // The closer's rights and folder, as for a write it made itself; a
  // release carries no requester: the renamer's then.
  Requester who = Requester::of(req);
  if (who.pid == 0) who = d.renamer;
  const sup::Result<Node> dst = fs.resolve(d.target, who);
  std::unique_ptr<Handle> h = dst ? open_node(fs, *dst, who, O_WRONLY) : nullptr;
  if (!h) {
    fs.errors().add(d.path, dst ? EIO : to_errno(dst.error().code),
                    "a scratch file renamed onto it while still open for writing was not delivered at its "
                    "close: " + (dst ? std::string("the file could not be opened") : dst.error().message),
                    "(" + std::to_string(content.size()) + " bytes)", d.id);
    return Reply::error(0);
  }
  return write_and_close(req, std::make_shared<WriteAndClose>(WriteAndClose{
                                  std::move(h), std::move(content), [req](int) { fuse_reply_err(req, 0); }}));
}

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
  const std::optional<std::string> to_path = scratch_dir_path(*to_dir);
  if (dst && dst->kind != Kind::scratch) {
    const std::string dst_path = to_path && !to_path->empty() ? *to_path + "/" + std::string(newname)
                                                              : std::string(newname);
    return onto_tree_file(fs, req, *src, *dst, dst_path, flags, who);
  }
  if (!to_path) return Reply::error(EACCES);
  return Reply::error(fs.scratch().rename(src->ino, to_dir->ino, *to_path, newname, flags & RENAME_NOREPLACE));
}

}  // namespace fsd
