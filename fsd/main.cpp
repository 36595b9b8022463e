// sbxfs: process supervision as a filesystem. Options, then run (daemon.cpp).
#include <cstdio>

#include <fuse_lowlevel.h>

#include "fsd/daemon.hpp"
#include "fsd/options.hpp"
#include "fsd/tools_path.hpp"

namespace {

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
