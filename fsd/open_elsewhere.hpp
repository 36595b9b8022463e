#pragma once
// Whether a process still holds a file open on another descriptor: FUSE
// sends a flush for every close(2), also of a duplicate, and shells open a
// redirection's target, dup2 it and close the original before the first
// write. A flush with nothing written is the end of an empty write only
// when no descriptor of the closing process refers to the file any more.
#include <string>
#include <sys/types.h>

#include <fuse_lowlevel.h>

namespace fsd {

/// True when one of `pid`'s descriptors is open on a file whose path (as
/// /proc shows it, from the process's own root) ends in `tail` and whose
/// inode is `ino`. False when none is, or /proc cannot tell.
bool open_elsewhere(pid_t pid, const std::string& tail, fuse_ino_t ino);

}  // namespace fsd
