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
/// Closes the command's input (stdin: "pipe"): the monitor lets go of its
/// write end of the `stdin` FIFO and removes the FIFO.
inline constexpr const char* kCtlEof = "eof";

/// The FIFO the command reads as its standard input (stdin: "pipe",
/// FORMAT.md "stdin"): the daemon writes to it, the monitor holds a write
/// end so that the command never reads EOF while no daemon does.
inline constexpr const char* kStdinFile = "stdin";

}  // namespace sup
