#include "supervisor/clock.hpp"

#include <cstdio>
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

namespace sup {

std::optional<std::int64_t> iso_to_ms(std::string_view iso) {
  // YYYY-MM-DDTHH:MM:SS.mmmZ exactly, as iso_now writes it.
  if (iso.size() != 24 || iso[4] != '-' || iso[7] != '-' || iso[10] != 'T' || iso[13] != ':' || iso[16] != ':' ||
      iso[19] != '.' || iso[23] != 'Z')
    return std::nullopt;
  auto num = [&](std::size_t at, std::size_t len) -> int {
    int v = 0;
    for (std::size_t i = at; i < at + len; ++i) {
      if (iso[i] < '0' || iso[i] > '9') return -1;
      v = v * 10 + (iso[i] - '0');
    }
    return v;
  };
  std::tm tm{};
  const int fields[] = {num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2), num(20, 3)};
  for (int f : fields)
    if (f < 0) return std::nullopt;
  tm.tm_year = fields[0] - 1900;
  tm.tm_mon = fields[1] - 1;
  tm.tm_mday = fields[2];
  tm.tm_hour = fields[3];
  tm.tm_min = fields[4];
  tm.tm_sec = fields[5];
  return static_cast<std::int64_t>(::timegm(&tm)) * 1000 + fields[6];
}

std::int64_t now_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

}  // namespace sup
