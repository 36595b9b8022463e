#pragma once
// The monitor's control FIFO (FORMAT.md, "ctl"): one ASCII request a line,
// written by the supervisor, read by the monitor's loop.
namespace sup {

inline constexpr const char* kCtlFile = "ctl";
/// SIGTERM (+ SIGCONT) to the tree, SIGKILL after the grace.
inline constexpr const char* kCtlTerm = "term";
/// SIGKILL to the whole tree at once.
inline constexpr const char* kCtlKill = "kill";
/// "signal N": signal N to the process group and every descendant.
inline constexpr const char* kCtlSignal = "signal ";

}  // namespace sup
