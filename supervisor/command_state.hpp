#pragma once
// A command's life as one table, state x event -> next state and action
// (s6-supervise's actions[state][event]), used by the supervisor's record
// and by the monitor's loop. Every cell is spelled out in command_state.cpp,
// an event that changes nothing included (action none).
//
// The record sees empty (a named slot), queued (accepted, waiting for a
// place under max_running), running, paused (SIGSTOP; with a cgroup,
// frozen), restarting (a run ended, the restart policy runs the next one
// after the delay), exited and error; the monitor sees running, stopping
// (SIGTERM sent, the grace runs), killing (SIGKILL sweeps) and restarting.
// status.json shows a stopping or killing command as "running".
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
  queued,      ///< accepted with `queue: true` while max_running commands ran; not started yet
  restarting,  ///< a run ended and the restart policy starts the next one after the delay
};
inline constexpr int kCommandStates = 9;

enum class CommandEvent : std::uint8_t {
  started,     ///< a run of the command was published (a new record, a slot's or a queued record's run, a restart)
  stop_asked,  ///< a `term` request (stop, a signal to the monitor)
  kill_asked,  ///< a `kill` request
  timed_out,   ///< the command's timeoutSec passed
  grace_over,  ///< the grace after SIGTERM passed, or the next SIGKILL sweep is due
  ended,       ///< the whole tree is gone and how it ended is known
  unreadable,  ///< what the record says cannot be read
  pause_asked,   ///< a SIGSTOP request
  resume_asked,  ///< a SIGCONT request
  run_ended,     ///< a run's tree is gone and the restart policy runs it again
  delay_over,    ///< the restart delay passed
  place_free,    ///< a place under max_running is free for a queued command
};
inline constexpr int kCommandEvents = 12;

enum class CommandAction : std::uint8_t {
  none,        ///< nothing changes (or only the state does)
  send_term,   ///< SIGTERM (+SIGCONT) to the tree, arm the grace
  send_kill,   ///< a SIGKILL sweep over the tree
  record_end,  ///< keep how it ended (a queued command: it never ran)
  freeze,      ///< with a cgroup, freeze it; else SIGSTOP to the tree
  thaw,        ///< with a cgroup, thaw it; and SIGCONT to the tree (for one stopped by itself)
  arm_delay,   ///< mark the log, arm the restart delay (nothing runs meanwhile)
  spawn,       ///< start the next run
  end_policy,  ///< a stop during the delay: the policy is over now, nothing more runs
  launch,      ///< start the queued command
};

struct Transition {
  CommandState next;
  CommandAction action;
};

/// The table's cell.
Transition transition(CommandState s, CommandEvent e);

/// status.json's "state": "empty", "queued", "running" (also stopping and
/// killing), "paused", "restarting", "exited", "error".
const char* state_name(CommandState s);
/// status.json's "running": a paused or restarting command runs too (its
/// policy does); a queued one does not yet.
bool is_running(CommandState s);
/// Over: exited or error.
bool has_ended(CommandState s);
/// Not over yet, though perhaps not running: running, or queued. `wait` blocks on these.
bool is_pending(CommandState s);

}  // namespace sup
