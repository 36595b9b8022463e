#pragma once
// What is left of a command whose monitor died without a word (so its
// adopted orphans went to init): found in /proc and killed.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sup {

/// SIGKILLs the live processes of the root's session and process group,
/// those whose environment holds every one of `env_marks` (none: no such
/// search), each started no earlier than the root (`root_start`, field 22),
/// and all their descendants. Returns how many it killed.
std::size_t kill_orphaned_tree(pid_t root, std::uint64_t root_start, const std::vector<std::string>& env_marks);

}  // namespace sup
