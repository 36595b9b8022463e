#pragma once
// The FUSE low-level operations of sbxfs. Each callback only decodes the
// request, calls the file's handler and replies; each is noexcept: a
// surprise is logged (fuse_log) and answered EIO.
#include <fuse_lowlevel.h>

namespace fsd {

class Filesystem;

/// The operations table. The session's userdata must be a `Filesystem**`
/// that points to the Filesystem before the first request arrives (the
/// session is created before the supervisor exists, to check options early).
const fuse_lowlevel_ops& lowlevel_ops();

}  // namespace fsd
