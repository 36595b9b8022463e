#include "supervisor/executable_check.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace sup {

// What execvp would run: a found, executable file, else why not.
Status check_executable(const std::string& argv0, const std::string& cwd, const std::string& path_var,
                        const OwnMount& own) {
  bool unseen = false;  // a place in the daemon's own mount was passed by
  auto check = [&own, &unseen](const std::string& p) -> int {
    const std::optional<std::string> real = own.outside(p);
    if (!real) {
      unseen = true;
      return ENOENT;
    }
    struct stat st{};
    if (::stat(real->c_str(), &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EACCES;
    if (::access(real->c_str(), X_OK) != 0) return errno;
    return 0;
  };
  if (argv0.find('/') != std::string::npos) {
    std::string p = argv0[0] == '/' ? argv0 : cwd + "/" + argv0;
    if (int e = check(p); e != 0 && !unseen) return error_from_errno(e, "cannot execute '" + argv0 + "'");
    return Ok{};
  }
  int worst = ENOENT;
  size_t i = 0;
  std::string pv = path_var.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_var;
  while (i <= pv.size()) {
    size_t j = pv.find(':', i);
    if (j == std::string::npos) j = pv.size();
    std::string dir = j > i ? pv.substr(i, j - i) : std::string(1, '.');
    if (dir[0] != '/') dir = cwd + "/" + dir;
    int e = check(dir + "/" + argv0);
    if (e == 0) return Ok{};
    if (e == EACCES) worst = EACCES;
    // As execvp: a name the system cannot take ends the search.
    if (e == ENAMETOOLONG) return error_from_errno(e, "cannot execute '" + argv0 + "'");
    i = j + 1;
  }
  if (unseen) return Ok{};
  if (worst == ENOENT) return Error{Errc::not_found, "cannot execute '" + argv0 + "': not found in PATH"};
  return error_from_errno(worst, "cannot execute '" + argv0 + "'");
}

}  // namespace sup
