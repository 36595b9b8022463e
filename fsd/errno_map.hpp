#pragma once
// The one place where the supervisor's error codes become errno values.
// Handlers pass sup::Error on (Reply::fail, ErrorLog::add); the errno is
// taken here when the reply is sent and when `errors` shows the line.
#include "supervisor/error.hpp"

namespace fsd {

/// sup::Errc -> errno, as sbxfs.5 lists them (each code says its errno in supervisor/error.hpp).
int to_errno(sup::Errc code);

/// "EINVAL", "ENOENT", ... for the `errors` file and "error: ..." answers.
const char* errno_name(int err);
/// The name of the errno `code` is answered with.
inline const char* errno_name(sup::Errc code) { return errno_name(to_errno(code)); }

}  // namespace fsd
