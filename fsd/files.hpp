#pragma once
// The files of the tree, one source file each, and what the dispatcher
// calls besides their openers (tree_file.hpp). Each opener checks nothing
// about access modes (the dispatcher did) and returns the open file's handle.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/stat.h>

#include "fsd/filesystem.hpp"
#include "fsd/handle.hpp"
#include "fsd/tree_file.hpp"

namespace fsd {

/// A handle that serves a text fixed at open by offset (status.json, tail,
/// errors, README): the procfs convention, st_size 0 and direct_io, so a
/// reader always gets one whole, consistent snapshot.
class SnapshotHandle : public Handle {
 public:
  explicit SnapshotHandle(std::string text) : text_(std::move(text)) {}
  Reply read(fuse_req_t, std::size_t size, off_t off) override { return Reply::slice(text_, off, size); }

 private:
  const std::string text_;
};

/// One entry of a directory listing.
struct DirEntry {
  std::string name;
  fuse_ino_t ino;
  mode_t mode;
  /// Its readdir offset (list_dir sets it): the entry's own place, the same
  /// in every listing of the folder, ascending within one.
  off_t off = 0;
};

// readme_file.cpp: README, plain-text usage built from the configuration.
std::string make_readme(const Config& cfg);

// log_file.cpp
/// The backing file of a log node in the state directory.
std::string log_path(const Node& node);

// stream_file.cpp: stdout and stderr served from the log's index, and the
// `,follow` and `,timestamps` views of log, stdout and stderr (open_log
// hands them over).
std::unique_ptr<Handle> open_stream(Filesystem& fs, const Node& node, const OpenRequest& req);
/// The record's log has an index (else an older build wrote it).
bool has_index(const sup::CommandStatus& st);
/// stat of procs/ID/stdout or stderr from the index: its size, the log's
/// times. False for other files, or without an index.
bool stream_attr(Filesystem& fs, const Node& node, struct stat* st);

// scratch_file.cpp: scratch files (ScratchFiles) as the tree shows them.
/// Where `dir`'s scratch files are, relative to the mount point ("" for the
/// root, "procs/ID"); nullopt for a folder that holds none (procs/, logs/).
std::optional<std::string> scratch_dir_path(const Node& dir);
/// `who`'s scratch `name` in `dir`; ENOENT when there is none. lookup()
/// tries it after the tree's own names.
sup::Result<Node> lookup_scratch(Filesystem& fs, const Node& dir, std::string_view name, const Requester& who);
/// `who`'s scratch files in `dir`, for its listing.
std::vector<DirEntry> list_scratch(Filesystem& fs, const Node& dir, const Requester& who);
struct stat scratch_attr(Filesystem& fs, const Node& node);
/// create(2) of `name` in `dir`: a new scratch, or with neither O_EXCL nor a
/// tree file of that name, the user's existing one. 0 or the errno
/// (EACCES where none can be, EEXIST, EDQUOT: also a line in `errors`).
int create_scratch(Filesystem& fs, const Node& dir, std::string_view name, mode_t mode, int flags,
                   const Requester& who, Node* node, std::unique_ptr<Handle>* h);
/// setattr of a scratch: size (EFBIG past max_request), mode, times; the
/// owner may be "changed" to itself only (EPERM).
int setattr_scratch(Filesystem& fs, const Node& node, const struct stat& attr, int to_set);
/// unlink(2): removes a scratch; EPERM for the tree's own files.
int unlink_entry(Filesystem& fs, const Node& dir, std::string_view name, const Requester& who);

// scratch_rename.cpp: rename(2). A scratch renamed over a writable file of
// the tree is a write of its content there and a close; the answer may come
// later (Reply::parked), from whoever answers the parked write or close.
Reply rename_entry(Filesystem& fs, fuse_req_t req, fuse_ino_t parent, std::string_view name,
                   fuse_ino_t newparent, std::string_view newname, unsigned flags);

/// A rename of a scratch over a file of the tree while the scratch was
/// still open for writing: what is done with its content once its last
/// writer has closed it (ScratchFiles keeps it until then).
struct Delivery {
  fuse_ino_t target;   ///< the file of the tree (looked up again then)
  std::string path;    ///< its path, as `errors` names it
  std::string id;      ///< its command's bgId ("" at the root)
  Requester renamer;
};
/// Writes `content` whole to the delivery's target and closes it, as the
/// rename would have, answering `req` (the last writer's close: a flush or
/// a release) with 0 once done: a refusal goes to `errors` only.
Reply deliver(Filesystem& fs, fuse_req_t req, const Delivery& d, std::string content);

// dispatcher.cpp: the open file that open(2) with `flags` makes of `node`
// (access modes already checked); null for a node that cannot be opened.
std::unique_ptr<Handle> open_node(Filesystem& fs, const Node& node, const Requester& who, int flags);

// box_steps_file.cpp: steps.json at the root, every kept step of the box (snapshot at open).

// tree.cpp and procs_dir.cpp: names, attributes and directories.

/// `name` in directory `parent`; ENOENT when there is no such file. A name
/// with parameters (`FILE,KEYS`, FILE a file of `parent`) gets an inode of
/// Filesystem::param_nodes() whose lookup count this call raises by one;
/// EINVAL when a key is wrong.
sup::Result<Node> lookup(Filesystem& fs, const Node& parent, std::string_view name, const Requester& who);
/// The attributes of `node`; `open` (may be null) is the handle of an fgetattr.
struct stat attr_of(Filesystem& fs, const Node& node, Handle* open);
/// Seconds the kernel may cache the name of `node` (that it exists) and its
/// attributes: its row's, but 0 s for a name with parameters (a reader's
/// own, not worth keeping). The output of an ended command keeps its
/// attributes longer (ended_output_cache.hpp).
double timeout_of(const Node& node);
double attr_timeout_of(Filesystem& fs, const Node& node);
/// The entries of a directory, "." and ".." first; ENOTDIR for a file.
/// For procs/ and logs/, `generation` (when given) gets the records'
/// listing generation the entries are of.
sup::Result<std::vector<DirEntry>> list_dir(Filesystem& fs, const Node& dir, const Requester& who,
                                            std::uint64_t* generation = nullptr);

// procs_dir.cpp: procs/ itself.
std::vector<DirEntry> list_procs(Filesystem& fs, const Requester& who, std::uint64_t* generation = nullptr);
/// tree.cpp: the readdir offset of a record's entry in procs/ and logs/.
off_t record_place(std::uint64_t serial);
/// `mkdir procs/NAME`: an empty named slot.
sup::Result<Node> make_slot(Filesystem& fs, const std::string& name, const Requester& who);
/// `rmdir procs/ID`: removes an ended command's record and logs.
sup::Status remove_record(Filesystem& fs, const std::string& name, const Requester& who);

}  // namespace fsd
