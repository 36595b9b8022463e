#pragma once
// exit.json, how a command ended (FORMAT.md): its one writer, used by the
// monitor and by a supervisor that found the monitor gone, and its one
// reader. A file that does not parse is an io_error naming it, never an
// exception.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "supervisor/error.hpp"

namespace sup {

/// The record's file name in a command's folder.
inline constexpr const char* kExitFile = "exit.json";
/// Bytes of exit.json.tmp reserved at the start, so that the end can be
/// recorded even when the logs filled the disk (more than any exit.json).
inline constexpr std::size_t kExitFileReserve = 1024;

struct ExitInfo {
  std::optional<int> exit_code;   ///< -1 in the file when a signal ended the root
  std::string signal;             ///< signal_name() of it, empty: none
  std::string end_reason;         ///< exited stopped timedOut oomKilled killed unknown
  std::string finished_at;
  bool timed_out = false;
  bool oom = false;               ///< the kernel's oom killer sent the SIGKILL
  std::string end_note;           ///< why the end is unknown
  std::uint64_t output_lost = 0;  ///< log bytes the monitor could not write
};

/// The file's text, one line. An absent exit_code is written as -1.
std::string format_exit(const ExitInfo& e);
/// Reads the text of an exit.json. A signal named by number, as older
/// monitors wrote some ("SIG34"), is given its name ("SIGRTMIN").
Result<ExitInfo> parse_exit(const std::string& text);

}  // namespace sup
