// sbxfs: process supervision as a filesystem. Options, then run (daemon.cpp).
#include <cstdio>
#include <malloc.h>

#include <fuse_lowlevel.h>

#include "fsd/daemon.hpp"
#include "fsd/options.hpp"
#include "fsd/tools_path.hpp"

namespace {

// Answers of a few MiB (output, status.json,all, masked log reads) are
// made and freed again and again. glibc would map each one afresh (above
// 128 KiB) and give the memory back at its free, so every answer first
// faults in its pages: on a VM, most of its cost (a 1 MiB `output` read
// 19.7 -> 2.7 ms, measured; bench/RESULTS.md). Up to 16 MiB comes from the
// heap (status.json,all of 11 000 records is 4.4 MB, built in a buffer of
// 5.6: above the 4 MiB of before, 1 050 faults a read, 30 -> 10 ms), and up
// to 32 MiB of free heap is kept for the next answers. Kept per arena: with
// glibc's default of one arena per FUSE thread (up to 8 per CPU), a burst of
// large answers (grep -r over records of MiB-long commands) left 250 MB
// resident; two arenas keep it to what the records hold plus 64 MiB (the
// same burst: 117 MB, of which the records' commands are ~100).
void keep_answer_memory() {
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 32 << 20);
  mallopt(M_ARENA_MAX, 2);
}

int main_with(fsd::Options& opts, const char* prog) {
  if (opts.show_help) {
    std::fputs(fsd::usage(prog).c_str(), stdout);
    std::puts("FUSE options:");
    fuse_cmdline_help();
    fuse_lowlevel_help();
    return 0;
  }
  if (opts.show_version) {
    std::printf("sbxfs %s (libfuse %s)\n", SBX_VERSION, fuse_pkgversion());
    return 0;
  }
  fsd::put_tools_on_path();  // before run() starts any thread
  keep_answer_memory();       // the same: before any thread has an arena
  return fsd::run(opts);
}

}  // namespace

int main(int argc, char** argv) {
  sup::Result<fsd::Options> opts = fsd::parse_options(argc, argv);
  if (!opts) {
    std::fprintf(stderr, "sbxfs: %s\n", opts.error().message.c_str());
    return 1;
  }
  const int rc = main_with(opts.value(), argv[0]);
  fuse_opt_free_args(&opts->fuse);  // idempotent: run() may have freed them already
  return rc;
}
