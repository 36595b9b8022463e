// Signal names <-> numbers, as the `signal` file takes them.
#include <csignal>

#include <gtest/gtest.h>

#include "supervisor/signal_names.hpp"

namespace {

TEST(SignalNames, ParsesNumbersNamesAndRealTime) {
  EXPECT_EQ(sup::parse_signal("15"), SIGTERM);
  EXPECT_EQ(sup::parse_signal(" TERM\n"), SIGTERM);
  EXPECT_EQ(sup::parse_signal("sigterm"), SIGTERM);
  EXPECT_EQ(sup::parse_signal("usr1"), SIGUSR1);
  EXPECT_EQ(sup::parse_signal("RTMIN+2"), SIGRTMIN + 2);
  EXPECT_EQ(sup::parse_signal("SIGRTMAX-1"), SIGRTMAX - 1);
  // RTMAX-N names a real-time signal only (audit: RTMAX-31 gave 33, the C library's own).
  EXPECT_EQ(sup::parse_signal("RTMAX-" + std::to_string(SIGRTMAX - SIGRTMIN)), SIGRTMIN);
  EXPECT_EQ(sup::parse_signal("RTMAX-" + std::to_string(SIGRTMAX - SIGRTMIN + 1)), std::nullopt);
  for (const char* bad : {"", "0", "65", "TERMX", "RTMIN-1", "RTMAX+1", "-9", "9 9", "SIG"})
    EXPECT_FALSE(sup::parse_signal(bad).has_value()) << bad;
}

TEST(SignalNames, NamesRoundTrip) {
  EXPECT_EQ(sup::signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(sup::signal_name(SIGRTMIN + 3), "SIGRTMIN+3");
  for (int s = 1; s <= SIGRTMAX; ++s) EXPECT_EQ(sup::parse_signal(sup::signal_name(s)), s) << s;
}

}  // namespace
