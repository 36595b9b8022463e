#pragma once
// The daemon's own tools (sbx-step) are on the PATH of every command: the
// daemon puts the folder they are installed in (the one beside its own
// executable: build/bin in the build tree, PREFIX/bin once installed; else
// the build's bin folder, for a daemon copied elsewhere alone) first on its
// own PATH, which commands inherit. A request's own "env": {"PATH"} still
// wins.
namespace fsd {

/// Puts the tools folder first on PATH if it holds sbx-step and is not
/// first already. Call before any thread starts (setenv).
void put_tools_on_path();

}  // namespace fsd
