#include "supervisor/start_folder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "supervisor/atomic_write.hpp"
#include "supervisor/exit_record.hpp"
#include "supervisor/monitor_ctl.hpp"
#include "supervisor/monitor_record.hpp"

namespace sup {

int prepare_start_folder(int dirfd) {
  for (const std::string& name : {atomic_tmp_name("spec.json"), atomic_tmp_name(kMonitorFile)}) {
    const int fd = ::openat(dirfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    ::close(fd);
  }
  if (::mkfifoat(dirfd, kCtlFile, 0600) != 0) return errno;
  return reserve_file(dirfd, atomic_tmp_name(kExitFile).c_str(), kExitFileReserve);
}

}  // namespace sup
