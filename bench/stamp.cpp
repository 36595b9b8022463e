// bench_stamp [DELAY_MS]: sleeps DELAY_MS (default 0), then writes
// clock_gettime(CLOCK_MONOTONIC) in nanoseconds and a newline to stdout and
// exits at once. The wake-up figure compares that stamp, the command's last
// instruction, with the moment a waiter learns that the command has ended.
//
// bench_stamp --until NS: the same, sleeping until CLOCK_MONOTONIC reaches
// NS nanoseconds.
//
// bench_stamp --go FIFO [DELAY_US]: the same, once FIFO has been opened for
// writing (opening it for reading blocks until then), DELAY_US microseconds
// later: many commands started one after another end at one moment that the
// benchmark chooses, however long their starts took.
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc > 2 && std::strcmp(argv[1], "--go") == 0) {
    const int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
    if (fd < 0) _exit(2);
    close(fd);
    if (const long us = argc > 3 ? std::atol(argv[3]) : 0; us > 0) {
      timespec d{us / 1000000, (us % 1000000) * 1000L};
      while (nanosleep(&d, &d) != 0) {
      }
    }
  } else if (argc > 2 && std::strcmp(argv[1], "--until") == 0) {
    const long long until = std::atoll(argv[2]);
    timespec t{static_cast<time_t>(until / 1000000000LL), static_cast<long>(until % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr) != 0) {
    }
  } else if (long delay_ms = argc > 1 ? std::atol(argv[1]) : 0; delay_ms > 0) {
    timespec d{delay_ms / 1000, (delay_ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0) {
    }
  }
  char buf[32];
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  int n = std::snprintf(buf, sizeof buf, "%lld\n", static_cast<long long>(now.tv_sec) * 1000000000LL + now.tv_nsec);
  ssize_t w = write(1, buf, static_cast<size_t>(n));
  _exit(w == n ? 0 : 1);
}
