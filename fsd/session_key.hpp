// Which session a requesting process belongs to, for `mine`.
//
// getsid(2) answers 0 when the session's leader lives outside the daemon's PID
// namespace (a container entered with `docker exec`, a CI runner): every such
// process would then look alike. Those sessions are named instead by their
// oldest ancestor that is still inside the namespace and in the same session,
// as a negative number so it can never equal a real session id.
#pragma once

#include <sys/types.h>

namespace fsd {

/// getsid(pid) when positive; -(oldest same-session ancestor) when getsid
/// gives 0; 0 when the process is gone (0 is never anyone's session).
pid_t session_key(pid_t pid);

}  // namespace fsd
