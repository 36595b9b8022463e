#pragma once
// The daemon's own tools (sbx-step) are on the PATH of every command: the
// daemon puts the folder they are installed in (the one beside its own
// executable: build/bin in the build tree, PREFIX/bin once installed) first
// on its own PATH, which commands inherit; a daemon copied elsewhere alone
// puts the build's bin folder last. A request's own "env": {"PATH"} still
// wins.
namespace fsd {

/// Puts the tools folder on PATH if it holds sbx-step and is not there
/// already. Call before any thread starts (setenv).
void put_tools_on_path();

}  // namespace fsd
