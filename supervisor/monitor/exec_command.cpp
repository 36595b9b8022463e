// The command's exec: execvp's PATH search without its shell fallback.
// glibc's execvp runs a file that execve refuses with ENOEXEC (random bytes,
// an ELF for another machine, a script without "#!") through /bin/sh as a
// script. A command given as argv runs no shell, so such a file is refused
// with ENOEXEC and nothing runs.
#include "monitor.hpp"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

namespace sbxmon {

namespace {

// The supervisor's own check of argv[0] searches the same default.
constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

__attribute__((no_sanitize("address", "undefined"))) const char* path_of(char* const envp[]) {
  for (char* const* e = envp; *e != nullptr; ++e)
    if (::strncmp(*e, "PATH=", 5) == 0 && (*e)[5] != '\0') return *e + 5;
  return kDefaultPath;
}

}  // namespace

// No sanitizer calls: it runs in a process that shares the monitor's memory.
__attribute__((no_sanitize("address", "undefined"))) int exec_command(char* const argv[], char* const envp[]) {
  const char* file = argv[0];
  if (file == nullptr || *file == '\0') return ENOENT;
  if (::strchr(file, '/') != nullptr) {
    ::execve(file, argv, envp);
    return errno;
  }
  const size_t file_len = ::strlen(file);
  bool denied = false;
  int last = ENOENT;
  for (const char* dir = path_of(envp);; ++dir) {
    const char* end = ::strchrnul(dir, ':');
    const size_t dir_len = static_cast<size_t>(end - dir);
    char path[PATH_MAX];
    // An empty entry is the working directory: the bare name, as execvp and
    // dash give it (a script's $0 and AT_EXECFN are that name, not ./NAME).
    const size_t sep = dir_len == 0 ? 0 : 1;
    if (dir_len + sep + file_len < sizeof path) {
      ::memcpy(path, dir, dir_len);
      if (sep) path[dir_len] = '/';
      ::memcpy(path + dir_len + sep, file, file_len + 1);
      ::execve(path, argv, envp);
      switch (errno) {
        case EACCES: denied = true; break;  // another entry may still hold it
        case ENOENT: case ENOTDIR: case ESTALE: case ENODEV: case ETIMEDOUT: case ENAMETOOLONG:
          last = errno;
          break;
        default: return errno;  // found, but it cannot run (ENOEXEC among them)
      }
    }
    if (*end == '\0') break;
    dir = end;
  }
  return denied ? EACCES : last;
}

}  // namespace sbxmon
