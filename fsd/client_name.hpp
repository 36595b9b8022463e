#pragma once
// Which client a process belongs to, for `mine`: the value of SBX_CLIENT in
// its environment. An agent's harness sets one per conversation, so two
// agents under one login can tell their commands apart, and an agent's file
// tool, which never shares a session with the shell that started a command,
// still sees its own work as `mine`.
//
// The environment is the one the process was started with
// (/proc/PID/environ): a shell that does `export SBX_CLIENT=x` later shows it
// only to the programs it starts, not for its own built-in `echo > cmd`.
// A label, never a credential: anyone can set any value.
#include <cstddef>
#include <string>
#include <sys/types.h>

namespace fsd {

/// Longest SBX_CLIENT value taken; a longer one is cut there.
constexpr std::size_t kMaxClientName = 256;

/// SBX_CLIENT of `pid`; empty when it has none, it is empty, not UTF-8, or
/// the process cannot be read (gone, another user's without ptrace rights).
std::string client_of(pid_t pid);

}  // namespace fsd
