#pragma once
// The table of the tree's files: for each kind of file, where its name is,
// its mode, how it is opened, the keys its name may carry (`FILE,KEYS`),
// how long the kernel may cache it and what its st_size says. Everything
// else (lookup, listings, attributes, open, names with parameters) reads
// this table, so adding a file to the tree is a Kind (inode.hpp), one row
// in tree_file.cpp and one handler file that defines its opener.
#include <memory>
#include <span>
#include <string_view>
#include <sys/stat.h>

#include "fsd/file_params.hpp"
#include "fsd/inode.hpp"

namespace fsd {

class Filesystem;
class Handle;
struct Node;
struct Requester;

/// What open(2) asked for, as an opener sees it.
struct OpenRequest {
  const Requester& who;  ///< its client is loaded when the row says reads_client
  int flags;             ///< open(2)'s flags (the access mode was checked against the row's mode)
};

/// Makes the open file of `node`; null when it cannot be opened (EIO).
using Opener = std::unique_ptr<Handle> (*)(Filesystem& fs, const Node& node, const OpenRequest& req);
/// Whether a name's keys, each right alone, mean something together (a
/// readiness condition, a cursor's form): checked at the lookup, so that a
/// bad name fails the open, not the read.
using KeysCheck = sup::Status (*)(const FileParams& params);

/// Where a file's name is.
enum class Place {
  root,     ///< a fixed name at the root
  record,   ///< a fixed name in every procs/ID/
  procs,    ///< procs/ID itself, named by a bgId
  logs,     ///< logs/ID.log
  unnamed,  ///< the root itself; scratch files (named by their writers)
};

/// What st_size shows.
enum class Size {
  zero,     ///< 0: the text is made at open (procfs style, read to EOF)
  readme,   ///< the README's length
  backing,  ///< the state directory's file behind it (log_path): real size, mtime and a big st_blksize
  stream,   ///< 0 with the logs' big st_blksize: made as it is read, in big reads (events)
};

struct TreeFile {
  Kind kind;
  Place place;
  std::string_view name = {};           ///< for Place::root and Place::record
  mode_t mode;                          ///< type and permission bits
  Opener open = nullptr;                ///< null for a directory
  std::span<const ParamKey> keys = {};  ///< the keys its name may carry; empty: none
  KeysCheck check_keys = nullptr;       ///< what they mean together; null: nothing more to check
  double entry_timeout = 1.0;           ///< seconds the kernel may keep its name
  double attr_timeout = 1.0;            ///< seconds the kernel may keep its attributes
  bool reads_client = false;            ///< its answer says `mine`: open loads the reader's SBX_CLIENT
  Size size = Size::zero;
};

/// Every row, in listing order.
std::span<const TreeFile> tree_files();
/// The row of `kind` (every kind has one).
const TreeFile& tree_file(Kind kind);
/// The file named `name` at `place` (root or record); null when there is none.
const TreeFile* tree_file(Place place, std::string_view name);

/// st_mode of a kind of file.
inline mode_t mode_of(Kind kind) { return tree_file(kind).mode; }

// The openers, one handler file each (named after the file).
/// README: plain-text usage built from the configuration.
std::unique_ptr<Handle> open_readme(Filesystem& fs, const Node& node, const OpenRequest& req);
/// cmd and procs/ID/cmd: writes accumulate into a request that is started in
/// the write (or flush) that completes it; reads give the answer. Opened
/// O_WRONLY, a close with nothing written is an empty request (EINVAL).
std::unique_ptr<Handle> open_cmd(Filesystem& fs, const Node& node, const OpenRequest& req);
/// status.json of the supervisor and of one command (snapshot at open).
std::unique_ptr<Handle> open_status(Filesystem& fs, const Node& node, const OpenRequest& req);
/// errors: the ErrorLog (snapshot at open).
std::unique_ptr<Handle> open_errors(Filesystem& fs, const Node& node, const OpenRequest& req);
/// steps.json at the root: every kept step of the box (snapshot at open).
std::unique_ptr<Handle> open_box_steps(Filesystem& fs, const Node& node, const OpenRequest& req);
/// log, stdout, stderr and logs/ID.log: preads of the state directory's
/// files, with their real size; stdout and stderr from the log's index, and
/// the `,follow` and `,timestamps` views (stream_file.cpp).
std::unique_ptr<Handle> open_log(Filesystem& fs, const Node& node, const OpenRequest& req);
/// tail: the last 4096 bytes of log (tail,tailBytes=N: N), masked (snapshot at open).
std::unique_ptr<Handle> open_tail(Filesystem& fs, const Node& node, const OpenRequest& req);
/// wait: a read blocks (parked) until the command ended or the cap ran out.
std::unique_ptr<Handle> open_wait(Filesystem& fs, const Node& node, const OpenRequest& req);
/// ready: write a readiness condition; a read blocks until ready (or ended, or the cap).
std::unique_ptr<Handle> open_ready(Filesystem& fs, const Node& node, const OpenRequest& req);
/// ready,KEYS: the keys make a readiness condition, or none.
sup::Status check_ready_keys(const FileParams& params);
/// output: a read blocks like `wait`, then answers stdout, stderr (each
/// capped at output_max, its end kept), exit code and duration as JSON.
std::unique_ptr<Handle> open_output(Filesystem& fs, const Node& node, const OpenRequest& req);
/// steps: takes `start NAME` / `end [EXITCODE]` lines (sbx-step writes them).
std::unique_ptr<Handle> open_steps(Filesystem& fs, const Node& node, const OpenRequest& req);
/// procs/ID/steps.json: the steps (snapshot at open).
std::unique_ptr<Handle> open_steps_json(Filesystem& fs, const Node& node, const OpenRequest& req);
/// stop: a write stops the whole tree and returns when it is gone.
std::unique_ptr<Handle> open_stop(Filesystem& fs, const Node& node, const OpenRequest& req);
/// signal: a write sends a signal (number or name) to the whole tree.
std::unique_ptr<Handle> open_signal(Filesystem& fs, const Node& node, const OpenRequest& req);
/// procs/ID/events: the log as JSON lines, one an output chunk, then the
/// end (events,since=CURSOR: after a cursor; events,follow: until the end).
std::unique_ptr<Handle> open_events(Filesystem& fs, const Node& node, const OpenRequest& req);
/// events,since=C: C has a cursor's form (whether it is this run's is known at the read).
sup::Status check_events_keys(const FileParams& params);
/// procs/ID/stdin: writes go to the command's standard input (a request
/// with "stdin": "pipe"), parked while its pipe is full; the close of
/// stdin,eof closes that input.
std::unique_ptr<Handle> open_stdin(Filesystem& fs, const Node& node, const OpenRequest& req);
/// A scratch file (scratch_file.cpp; O_TRUNC honoured); null when it is gone.
std::unique_ptr<Handle> open_scratch(Filesystem& fs, const Node& node, const OpenRequest& req);

}  // namespace fsd
