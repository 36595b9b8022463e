#pragma once
// Whether a start's argv[0] would run, checked before anything is claimed.
#include <string>

#include "supervisor/error.hpp"
#include "supervisor/own_mount.hpp"

namespace sup {

/// What execvp would run: a found, executable file, else why not (argv[0]
/// looked up in `path_var`, default /usr/local/bin:/usr/bin:/bin, unless it
/// holds a '/'; relative entries against `cwd`). A place in `own` is not
/// looked at: the command may be there (Ok when it is not found elsewhere:
/// its exec tells).
Status check_executable(const std::string& argv0, const std::string& cwd, const std::string& path_var,
                        const OwnMount& own = OwnMount());

}  // namespace sup
