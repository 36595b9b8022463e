#pragma once
// The FUSE low-level operations of sbxfs. Each callback only decodes the
// request, calls the file's handler and replies; each is noexcept: a
// surprise is logged (fuse_log) and answered EIO.
#include <fuse_lowlevel.h>

namespace fsd {

class Filesystem;

/// The largest read the kernel sends (the mount's max_read, and init's).
/// A reply from a file is spliced only when libfuse's pipe holds it whole
/// with a page per piece, and a pipe grows to 1 MiB (pipe-max-size) without
/// CAP_SYS_RESOURCE, which root in a container may lack too (F_SETPIPE_SZ
/// past it: EPERM, seen as root on the machines this is built on); a bigger
/// reply is copied through a buffer libfuse allocates for each one, about
/// three times slower (1 MiB requests measured: `cat stdout` 0.71-0.79 s
/// against 0.21-0.26 s). So a 1 MiB read(2) is two requests of 512 KiB,
/// each spliced.
constexpr unsigned kMaxRead = 512 * 1024;

/// The operations table. The session's userdata must be a `Filesystem**`
/// that points to the Filesystem before the first request arrives (the
/// session is created before the supervisor exists, to check options early).
const fuse_lowlevel_ops& lowlevel_ops();

}  // namespace fsd
