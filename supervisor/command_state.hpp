#pragma once
// A command's life as one table, state x event -> next state and action
// (s6-supervise's actions[state][event]), used by the supervisor's record
// and by the monitor's loop. Every cell is spelled out in command_state.cpp,
// an event that changes nothing included (action none).
//
// The record sees empty (a named slot), running, paused (SIGSTOP; with a
// cgroup, frozen), exited and error; the monitor sees running, stopping
// (SIGTERM sent, the grace runs) and killing (SIGKILL sweeps). status.json
// shows a stopping or killing command as "running". Room is left for
// "queued" (supervision options).
#include <cstdint>
#include <string_view>

namespace sup {

enum class CommandState : std::uint8_t {
  empty,     ///< a named slot, never started (or kept for a new run)
  running,   ///< the command runs
  paused,    ///< stopped on request (SIGSTOP; with a cgroup, frozen) until a SIGCONT
  stopping,  ///< asked to end: SIGTERM sent to the tree, SIGKILL after the grace
  killing,   ///< SIGKILL sweeps until the tree is gone
  exited,    ///< the tree has ended; exit.json says how
  error,     ///< the record cannot be read (or its command cannot be known)
};
inline constexpr int kCommandStates = 7;

enum class CommandEvent : std::uint8_t {
  started,     ///< a run of the command was published (a new record, or a slot's new run)
  stop_asked,  ///< a `term` request (stop, a signal to the monitor)
  kill_asked,  ///< a `kill` request
  timed_out,   ///< the command's timeoutSec passed
  grace_over,  ///< the grace after SIGTERM passed, or the next SIGKILL sweep is due
  ended,       ///< the whole tree is gone and how it ended is known
  unreadable,  ///< what the record says cannot be read
  pause_asked,   ///< a SIGSTOP request
  resume_asked,  ///< a SIGCONT request
};
inline constexpr int kCommandEvents = 9;

enum class CommandAction : std::uint8_t {
  none,        ///< nothing changes (or only the state does)
  send_term,   ///< SIGTERM (+SIGCONT) to the tree, arm the grace
  send_kill,   ///< a SIGKILL sweep over the tree
  record_end,  ///< keep how it ended
  freeze,      ///< with a cgroup, freeze it; else SIGSTOP to the tree
  thaw,        ///< with a cgroup, thaw it; and SIGCONT to the tree (for one stopped by itself)
};

struct Transition {
  CommandState next;
  CommandAction action;
};

/// The table's cell.
Transition transition(CommandState s, CommandEvent e);

/// status.json's "state": "empty", "running" (also stopping and killing),
/// "paused", "exited", "error".
const char* state_name(CommandState s);
/// status.json's "running" (a paused command runs too).
bool is_running(CommandState s);
/// Over: exited or error.
bool has_ended(CommandState s);

}  // namespace sup
