// The command's transition table, cell by cell: every state x event pair
// has its row here, written out independently of command_state.cpp.
#include <iterator>
#include <tuple>

#include <gtest/gtest.h>

#include "supervisor/command_state.hpp"

namespace {

using sup::CommandAction;
using sup::CommandEvent;
using sup::CommandState;
using S = CommandState;
using E = CommandEvent;
using A = CommandAction;

struct Cell {
  S from;
  E event;
  S to;
  A action;
};

constexpr Cell kExpected[] = {
    {S::empty, E::started, S::running, A::none},
    {S::empty, E::stop_asked, S::empty, A::none},
    {S::empty, E::kill_asked, S::empty, A::none},
    {S::empty, E::timed_out, S::empty, A::none},
    {S::empty, E::grace_over, S::empty, A::none},
    {S::empty, E::ended, S::empty, A::none},
    {S::empty, E::unreadable, S::error, A::none},
    {S::empty, E::pause_asked, S::empty, A::none},
    {S::empty, E::resume_asked, S::empty, A::none},
    {S::empty, E::run_ended, S::empty, A::none},
    {S::empty, E::delay_over, S::empty, A::none},
    {S::empty, E::place_free, S::empty, A::none},

    {S::running, E::started, S::running, A::none},
    {S::running, E::stop_asked, S::stopping, A::send_term},
    {S::running, E::kill_asked, S::killing, A::send_kill},
    {S::running, E::timed_out, S::stopping, A::send_term},
    {S::running, E::grace_over, S::running, A::none},
    {S::running, E::ended, S::exited, A::record_end},
    {S::running, E::unreadable, S::error, A::none},
    {S::running, E::pause_asked, S::paused, A::freeze},
    {S::running, E::resume_asked, S::running, A::thaw},
    {S::running, E::run_ended, S::restarting, A::arm_delay},
    {S::running, E::delay_over, S::running, A::none},
    {S::running, E::place_free, S::running, A::none},

    {S::paused, E::started, S::paused, A::none},
    {S::paused, E::stop_asked, S::stopping, A::send_term},
    {S::paused, E::kill_asked, S::killing, A::send_kill},
    {S::paused, E::timed_out, S::stopping, A::send_term},
    {S::paused, E::grace_over, S::paused, A::none},
    {S::paused, E::ended, S::exited, A::record_end},
    {S::paused, E::unreadable, S::error, A::none},
    {S::paused, E::pause_asked, S::paused, A::freeze},
    {S::paused, E::resume_asked, S::running, A::thaw},
    {S::paused, E::run_ended, S::restarting, A::arm_delay},
    {S::paused, E::delay_over, S::paused, A::none},
    {S::paused, E::place_free, S::paused, A::none},

    {S::stopping, E::started, S::stopping, A::none},
    {S::stopping, E::stop_asked, S::stopping, A::none},
    {S::stopping, E::kill_asked, S::killing, A::send_kill},
    {S::stopping, E::timed_out, S::stopping, A::none},
    {S::stopping, E::grace_over, S::killing, A::send_kill},
    {S::stopping, E::ended, S::exited, A::record_end},
    {S::stopping, E::unreadable, S::error, A::none},
    {S::stopping, E::pause_asked, S::stopping, A::none},
    {S::stopping, E::resume_asked, S::stopping, A::none},
    {S::stopping, E::run_ended, S::restarting, A::arm_delay},
    {S::stopping, E::delay_over, S::stopping, A::none},
    {S::stopping, E::place_free, S::stopping, A::none},

    {S::killing, E::started, S::killing, A::none},
    {S::killing, E::stop_asked, S::killing, A::none},
    {S::killing, E::kill_asked, S::killing, A::send_kill},
    {S::killing, E::timed_out, S::killing, A::none},
    {S::killing, E::grace_over, S::killing, A::send_kill},
    {S::killing, E::ended, S::exited, A::record_end},
    {S::killing, E::unreadable, S::error, A::none},
    {S::killing, E::pause_asked, S::killing, A::none},
    {S::killing, E::resume_asked, S::killing, A::none},
    {S::killing, E::run_ended, S::restarting, A::arm_delay},
    {S::killing, E::delay_over, S::killing, A::none},
    {S::killing, E::place_free, S::killing, A::none},

    {S::exited, E::started, S::running, A::none},
    {S::exited, E::stop_asked, S::exited, A::none},
    {S::exited, E::kill_asked, S::exited, A::none},
    {S::exited, E::timed_out, S::exited, A::none},
    {S::exited, E::grace_over, S::exited, A::none},
    {S::exited, E::ended, S::exited, A::none},
    {S::exited, E::unreadable, S::exited, A::none},
    {S::exited, E::pause_asked, S::exited, A::none},
    {S::exited, E::resume_asked, S::exited, A::none},
    {S::exited, E::run_ended, S::exited, A::none},
    {S::exited, E::delay_over, S::exited, A::none},
    {S::exited, E::place_free, S::exited, A::none},

    {S::error, E::started, S::running, A::none},
    {S::error, E::stop_asked, S::error, A::none},
    {S::error, E::kill_asked, S::error, A::none},
    {S::error, E::timed_out, S::error, A::none},
    {S::error, E::grace_over, S::error, A::none},
    {S::error, E::ended, S::error, A::none},
    {S::error, E::unreadable, S::error, A::none},
    {S::error, E::pause_asked, S::error, A::none},
    {S::error, E::resume_asked, S::error, A::none},
    {S::error, E::run_ended, S::error, A::none},
    {S::error, E::delay_over, S::error, A::none},
    {S::error, E::place_free, S::error, A::none},

    // queued: a stop ends it without a run; a free place launches it
    {S::queued, E::started, S::running, A::none},
    {S::queued, E::stop_asked, S::exited, A::record_end},
    {S::queued, E::kill_asked, S::exited, A::record_end},
    {S::queued, E::timed_out, S::queued, A::none},
    {S::queued, E::grace_over, S::queued, A::none},
    {S::queued, E::ended, S::queued, A::none},
    {S::queued, E::unreadable, S::error, A::none},
    {S::queued, E::pause_asked, S::queued, A::none},
    {S::queued, E::resume_asked, S::queued, A::none},
    {S::queued, E::run_ended, S::queued, A::none},
    {S::queued, E::delay_over, S::queued, A::none},
    {S::queued, E::place_free, S::queued, A::launch},

    // restarting: the delay runs; a stop ends the policy at once
    {S::restarting, E::started, S::running, A::none},
    {S::restarting, E::stop_asked, S::exited, A::end_policy},
    {S::restarting, E::kill_asked, S::exited, A::end_policy},
    {S::restarting, E::timed_out, S::restarting, A::none},
    {S::restarting, E::grace_over, S::restarting, A::none},
    {S::restarting, E::ended, S::exited, A::record_end},
    {S::restarting, E::unreadable, S::error, A::none},
    {S::restarting, E::pause_asked, S::restarting, A::none},
    {S::restarting, E::resume_asked, S::restarting, A::none},
    {S::restarting, E::run_ended, S::restarting, A::none},
    {S::restarting, E::delay_over, S::running, A::spawn},
    {S::restarting, E::place_free, S::restarting, A::none},
};

TEST(CommandStateTable, EveryCell) {
  static_assert(std::size(kExpected) == sup::kCommandStates * sup::kCommandEvents);
  bool seen[sup::kCommandStates][sup::kCommandEvents] = {};
  for (const Cell& c : kExpected) {
    const auto t = sup::transition(c.from, c.event);
    EXPECT_EQ(t.next, c.to) << "state " << int(c.from) << " event " << int(c.event);
    EXPECT_EQ(t.action, c.action) << "state " << int(c.from) << " event " << int(c.event);
    seen[int(c.from)][int(c.event)] = true;
  }
  for (int s = 0; s < sup::kCommandStates; ++s)
    for (int e = 0; e < sup::kCommandEvents; ++e) EXPECT_TRUE(seen[s][e]) << s << " x " << e;
}

// The names are the contract's (status.json): a stop under way is running,
// and so is a paused command, and one waiting for its restart; a queued one
// is not yet.
TEST(CommandStateTable, NamesAndKinds) {
  const std::tuple<S, const char*, bool, bool> kRows[] = {
      {S::empty, "empty", false, false},      {S::running, "running", true, false},
      {S::paused, "paused", true, false},
      {S::stopping, "running", true, false},  {S::killing, "running", true, false},
      {S::exited, "exited", false, true},     {S::error, "error", false, true},
      {S::queued, "queued", false, false},    {S::restarting, "restarting", true, false},
  };
  static_assert(std::size(kRows) == sup::kCommandStates);
  for (auto [s, name, running, ended] : kRows) {
    EXPECT_STREQ(sup::state_name(s), name);
    EXPECT_EQ(sup::is_running(s), running) << name;
    EXPECT_EQ(sup::has_ended(s), ended) << name;
    // wait blocks on what runs and on what is queued to run
    EXPECT_EQ(sup::is_pending(s), running || s == S::queued) << name;
  }
}

}  // namespace
