#pragma once
// Whether a start's argv[0] would run, checked before anything is claimed.
#include <string>

#include "supervisor/error.hpp"

namespace sup {

/// What execvp would run: a found, executable file, else why not (argv[0]
/// looked up in `path_var`, default /usr/local/bin:/usr/bin:/bin, unless it
/// holds a '/'; relative entries against `cwd`).
Status check_executable(const std::string& argv0, const std::string& cwd, const std::string& path_var);

}  // namespace sup
