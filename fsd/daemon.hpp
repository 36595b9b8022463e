#pragma once
// Runs sbxfs: takes the state directory, cleans a stale mount, starts the
// supervisor, mounts, serves until unmounted or signalled, and unmounts.
#include "fsd/options.hpp"

namespace fsd {

/// Without --foreground: forks first (before any thread); the calling
/// process exits 0 once mounted, or 1 with the reason on stderr. Returns the
/// exit status of the process that served (0: clean unmount).
int run(Options& opts);

}  // namespace fsd
