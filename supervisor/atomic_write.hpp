#pragma once
// Writing the state directory's files, shared by the daemon and the monitor
// (no allocation beyond the caller's strings, no exceptions: the monitor is
// linked statically). A file is written to NAME.tmp and renamed over NAME,
// so a crash of any process leaves the old or the new content, never a torn
// one. fsync is optional: it only matters for a power loss, after which
// every command is gone anyway and the loader tolerates a torn file; it cost
// 1-6 ms per write on ext4.
#include <cstddef>
#include <string>
#include <string_view>

namespace sup {

/// Writes all of buf (retries short writes and EINTR). Returns 0 or an errno.
int write_all(int fd, const void* buf, std::size_t len);

/// NAME.tmp: where write_file_atomic_at() writes NAME first.
std::string atomic_tmp_name(std::string_view name);

/// Writes `content` to `name` (relative to `dirfd`, or AT_FDCWD) through
/// `name`.tmp and a rename; with `sync`, fsyncs the file and its folder.
/// NAME.tmp is overwritten in place and cut to size, not truncated first,
/// so space reserved by reserve_file() is used without new blocks.
/// Returns 0 or an errno; `failed`, if given, gets the step that failed
/// ("create", "write", "fsync", "rename"). NAME.tmp is removed on failure.
int write_file_atomic_at(int dirfd, const char* name, std::string_view content, bool sync = false,
                         const char** failed = nullptr);

/// Creates NAME filled with `size` blanks, so that a later
/// write_file_atomic_at() whose tmp name is NAME finds its space already
/// allocated (exit.json must be writable even when the logs filled the
/// disk). A NAME of `size` bytes or more is kept as it is. Returns 0 or an
/// errno.
int reserve_file(int dirfd, const char* name, std::size_t size);

}  // namespace sup
