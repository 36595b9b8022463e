#pragma once
// A request to a command's monitor through its ctl FIFO (monitor_ctl.hpp).
#include <string>

#include "supervisor/error.hpp"

namespace sup {

/// Writes `line` into DIR/ctl without blocking. A monitor that is finishing
/// (no reader: ENXIO, or no FIFO) is no error: its exit event follows.
Status write_ctl(const std::string& dir, const std::string& line);

}  // namespace sup
