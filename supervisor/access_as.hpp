#pragma once
// Permission checks as the user a command will run as (allow_other), made
// by the kernel itself (modes, ACLs, every directory on the way), before
// anything of a start is claimed: the monitor drops to that user only just
// before the exec, and has changed to the working directory before that.
#include <string>

#include "supervisor/error.hpp"
#include "supervisor/spec.hpp"

namespace sup {

/// Whether `who` may use directory `dir` as its working directory (search
/// it, and every directory above it): Ok, or EACCES in words. This thread
/// takes `who`'s file-system ids and groups for the check and then its own
/// back (the raw system calls change the calling thread alone); a process
/// that is not root checks nothing (it runs every command as itself).
Status check_searchable_as(const std::string& dir, const Credentials& who);

}  // namespace sup
