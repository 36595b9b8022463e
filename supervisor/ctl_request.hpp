#pragma once
// A request to a command's monitor through its ctl FIFO (monitor_ctl.hpp).
#include <string>

#include "supervisor/error.hpp"

namespace sup {

/// Writes `line` into DIR/ctl without blocking. A monitor that is finishing
/// (no reader: ENXIO, or no FIFO) is no error: its exit event follows.
Status write_ctl(const std::string& dir, const std::string& line);
/// Whether a monitor reads DIR/ctl now (it alone holds the FIFO open for
/// reading, from before its command runs until it exits).
bool monitor_answers(const std::string& dir);

}  // namespace sup
