#pragma once
// The open files of the tree. fi->fh is a handle's address; this table owns
// the handles, so those the kernel never released (the mount went away while
// they were open: no RELEASE follows) are freed with the filesystem instead
// of leaking.
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fsd/handle.hpp"

namespace fsd {

class OpenHandles {
 public:
  /// Keeps `h`; the return value is the fh to give the kernel.
  std::uint64_t keep(std::unique_ptr<Handle> h);
  /// Frees a released handle (or one whose open could not be answered).
  void drop(std::uint64_t fh);
  /// Frees every handle left; once the FUSE loop has ended.
  void clear();

 private:
  std::mutex mu_;
  std::unordered_map<std::uint64_t, std::unique_ptr<Handle>> open_;  // guarded by mu_
};

}  // namespace fsd
