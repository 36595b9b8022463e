#pragma once
// posix_spawn of a benchmark's child, shared by the bench programs.
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <string>
#include <vector>

extern char** environ;

// posix_spawn(p) with stdout to out_fd (or /dev/null); the pid or -1.
inline pid_t spawn_child(const std::vector<std::string>& args, int out_fd = -1, bool search = false) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (out_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  else
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  int rc = search ? posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ)
                  : posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

