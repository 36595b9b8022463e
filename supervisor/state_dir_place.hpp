// Where a state directory may be: not inside another one's own folders.
#pragma once

#include <string>

namespace sup {

/// Why `dir` cannot be a state directory, or empty: it is inside one of
/// another state directory's own entries (procs, staging, ...), at any
/// depth and through symlinks, or holds another state directory in one of
/// its own (or one level below). sbxfs@X keeps its records in
/// /var/lib/sbxfs/X, inside the default daemon's: an instance named
/// `staging` would have its records swept by the default daemon as starts
/// left unfinished, one named `procs` taken for records. A state directory
/// is known by its `lock`, a file, beside its `procs/`.
std::string state_dir_misplaced(const std::string& dir);

}  // namespace sup
