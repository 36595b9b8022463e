#include "supervisor/clock.hpp"

#include <ctime>

namespace sup {

std::string iso_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  ::gmtime_r(&ts.tv_sec, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[64];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ts.tv_nsec / 1000000));
  return out;
}

}  // namespace sup
