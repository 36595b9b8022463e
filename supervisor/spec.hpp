#pragma once
// What to start: the validated form of a request.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/types.h>

#include "supervisor/error.hpp"
#include "supervisor/ready_condition.hpp"
#include "supervisor/restart_policy.hpp"

namespace sup {

/// Who runs the command (allow_other). Absent: the supervisor's own user.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};

/// `limits` of a request: applied through the command's cgroup.
struct Limits {
  std::optional<std::uint64_t> memory_max;  ///< bytes (memory.max)
  std::optional<double> cpu_max;            ///< percent of one core, 100 = one core (cpu.max)
  std::optional<std::uint64_t> pids_max;    ///< processes and threads at once (pids.max)
};

struct StartSpec {
  std::vector<std::string> argv;  ///< run directly; exactly one of argv / shell
  std::optional<std::string> shell;  ///< run as /bin/sh -c SHELL
  std::string cwd;                ///< absolute; required
  /// cwd is where the writer is (not given, or given as that): the command
  /// may run there whoever it runs as, as any child of the writer could.
  bool cwd_is_writers = true;
  std::map<std::string, std::string> env;         ///< overlay on the supervisor's env
  std::map<std::string, std::string> secret_env;  ///< same, values masked when shown
  std::string note;
  std::string name;               ///< bgId to use; empty: a fresh id
  std::optional<double> timeout_sec;
  double stop_grace_sec = 5;
  std::optional<Credentials> run_as;
  std::optional<ReadyCondition> ready;  ///< readyPort readyLog readyLogStream readyHttp readyHttpStatus readyIntervalMs readyFd
  std::optional<Limits> limits;         ///< needs cgroup tracking and the controllers
  /// `stdin: "pipe"`: the command reads its standard input from a FIFO of its
  /// record (procs/ID/stdin writes to it); false (`"null"`): /dev/null.
  bool stdin_pipe = false;
  // Supervision options (restart, restartDelaySec, maxRestarts, queue).
  RestartPolicy restart = RestartPolicy::no;
  double restart_delay_sec = 1;              ///< the first delay; doubles after each run shorter than 10 s, up to 60
  std::optional<std::uint64_t> max_restarts;  ///< none: no limit
  bool queue = false;                        ///< past max_running: queued, not try_again
  /// Set by the supervisor for shell text too long for one exec argument
  /// (Linux: 128 KiB): the text is run from this file instead.
  std::string script_file;
  pid_t requester_sid = 0;        ///< session id of the requester (for `mine`)
  /// SBX_CLIENT of the requester (for `mine`, shown as `client`); empty: none.
  /// A label the requester chose, never a credential.
  std::string requester_client;
  uid_t requester_uid = 0;
  /// The requester's process, blocked in the write while the start is
  /// under way (0: none): with run_as, the command starts in that
  /// process's own working directory, reached through /proc/PID/cwd and
  /// never by its path, which the writer may change meanwhile. Not stored.
  pid_t requester_pid = 0;

  /// The argv actually executed (shell expanded to /bin/sh -c).
  std::vector<std::string> effective_argv() const;
};

/// Checks a name a user gives: [A-Za-z0-9._-], 1..64 chars, not
/// beginning with '.' (such names are scratch files' in the tree).
Status validate_name(const std::string& name);
/// The names a record may have in the state directory: also those an older
/// build accepted (a leading '.', but not "." or "..").
Status validate_stored_name(const std::string& name);

/// Parses the JSON request keys that sbxfs.5 lists for `cmd` (argv, cmd, cwd, env, secretEnv,
/// note, name, timeoutSec, stopGraceSec, the ready keys, limits, stdin,
/// restart, restartDelaySec, maxRestarts, queue).
/// Unknown keys and wrong types are invalid_argument.
/// `default_cwd` fills a missing cwd.
Result<StartSpec> parse_json_request(const nlohmann::json& j, const std::string& default_cwd);

/// Plain text request: a shell command; one trailing newline is dropped.
Result<StartSpec> parse_text_request(std::string_view text, const std::string& default_cwd);

/// Either of the above: JSON when the first non-blank byte is '{'.
Result<StartSpec> parse_request(std::string_view text, const std::string& default_cwd);

/// `limits`: {"memoryMax": BYTES, "cpuMax": PERCENT, "pidsMax": N}; others are invalid_argument.
Result<Limits> limits_from_json(const nlohmann::json& j);
nlohmann::json limits_to_json(const Limits& l);

nlohmann::json spec_to_json(const StartSpec& s);
Result<StartSpec> spec_from_json(const nlohmann::json& j);

}  // namespace sup
