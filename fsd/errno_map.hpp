#pragma once
// The one place where the supervisor's error codes become errno values.
#include "supervisor/error.hpp"

namespace fsd {

/// sup::Errc -> errno (decisions: "Errno mapping").
int to_errno(sup::Errc code);

/// "EINVAL", "ENOENT", ... for the `errors` file and "error: ..." answers.
const char* errno_name(int err);

}  // namespace fsd
