#include "supervisor/command_state.hpp"

namespace sup {

namespace {

using S = CommandState;
using A = CommandAction;

constexpr Transition kNop(S s) { return {s, A::none}; }

// Rows: states in enum order; columns: started, stop_asked, kill_asked,
// timed_out, grace_over, ended, unreadable, pause_asked, resume_asked,
// run_ended, delay_over, place_free.
constexpr Transition kTable[kCommandStates][kCommandEvents] = {
    /* empty */
    {{S::running, A::none}, kNop(S::empty), kNop(S::empty), kNop(S::empty), kNop(S::empty), kNop(S::empty),
     {S::error, A::none}, kNop(S::empty), kNop(S::empty), kNop(S::empty), kNop(S::empty), kNop(S::empty)},
    /* running: a CONT still goes to the tree, for a process stopped by itself */
    {kNop(S::running), {S::stopping, A::send_term}, {S::killing, A::send_kill}, {S::stopping, A::send_term},
     kNop(S::running), {S::exited, A::record_end}, {S::error, A::none}, {S::paused, A::freeze},
     {S::running, A::thaw}, {S::restarting, A::arm_delay}, kNop(S::running), kNop(S::running)},
    /* paused: ends as running does (the TERM thaws it first); a second STOP
       freezes again, catching a member continued from outside */
    {kNop(S::paused), {S::stopping, A::send_term}, {S::killing, A::send_kill}, {S::stopping, A::send_term},
     kNop(S::paused), {S::exited, A::record_end}, {S::error, A::none}, {S::paused, A::freeze},
     {S::running, A::thaw}, {S::restarting, A::arm_delay}, kNop(S::paused), kNop(S::paused)},
    /* stopping: a second stop or a timeout changes nothing; the grace ends in
       SIGKILL; a timed-out run may be restarted */
    {kNop(S::stopping), kNop(S::stopping), {S::killing, A::send_kill}, kNop(S::stopping),
     {S::killing, A::send_kill}, {S::exited, A::record_end}, {S::error, A::none}, kNop(S::stopping),
     kNop(S::stopping), {S::restarting, A::arm_delay}, kNop(S::stopping), kNop(S::stopping)},
    /* killing: each kill request and each due sweep sends SIGKILL again */
    {kNop(S::killing), kNop(S::killing), {S::killing, A::send_kill}, kNop(S::killing), {S::killing, A::send_kill},
     {S::exited, A::record_end}, {S::error, A::none}, kNop(S::killing), kNop(S::killing),
     {S::restarting, A::arm_delay}, kNop(S::killing), kNop(S::killing)},
    /* exited: only a new run of its name changes it */
    {{S::running, A::none}, kNop(S::exited), kNop(S::exited), kNop(S::exited), kNop(S::exited), kNop(S::exited),
     kNop(S::exited), kNop(S::exited), kNop(S::exited), kNop(S::exited), kNop(S::exited), kNop(S::exited)},
    /* error: as exited */
    {{S::running, A::none}, kNop(S::error), kNop(S::error), kNop(S::error), kNop(S::error), kNop(S::error),
     kNop(S::error), kNop(S::error), kNop(S::error), kNop(S::error), kNop(S::error), kNop(S::error)},
    /* queued: nothing runs, so a stop ends it at once (it never runs); a free
       place launches it, and it is queued until that run is published */
    {{S::running, A::none}, {S::exited, A::record_end}, {S::exited, A::record_end}, kNop(S::queued),
     kNop(S::queued), kNop(S::queued), {S::error, A::none}, kNop(S::queued), kNop(S::queued), kNop(S::queued),
     kNop(S::queued), {S::queued, A::launch}},
    /* restarting: nothing runs until the delay is over; a stop ends the
       policy at once; signals have no process to go to */
    {{S::running, A::none}, {S::exited, A::end_policy}, {S::exited, A::end_policy}, kNop(S::restarting),
     kNop(S::restarting), {S::exited, A::record_end}, {S::error, A::none}, kNop(S::restarting),
     kNop(S::restarting), kNop(S::restarting), {S::running, A::spawn}, kNop(S::restarting)},
};

}  // namespace

Transition transition(CommandState s, CommandEvent e) {
  return kTable[static_cast<int>(s)][static_cast<int>(e)];
}

const char* state_name(CommandState s) {
  switch (s) {
    case S::empty: return "empty";
    case S::running:
    case S::stopping:
    case S::killing: return "running";
    case S::paused: return "paused";
    case S::exited: return "exited";
    case S::error: return "error";
    case S::queued: return "queued";
    case S::restarting: return "restarting";
  }
  return "error";
}

bool is_running(CommandState s) {
  return s == S::running || s == S::paused || s == S::stopping || s == S::killing || s == S::restarting;
}

bool has_ended(CommandState s) { return s == S::exited || s == S::error; }

bool is_pending(CommandState s) { return is_running(s) || s == S::queued; }

}  // namespace sup
