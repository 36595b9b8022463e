#pragma once
// The monitor fork server's job protocol, between the supervisor
// (monitor_launcher.cpp) and `sbxfs-monitor --serve` (monitor/server.cpp).
//
// The server's fd 0 is a SOCK_SEQPACKET socket. Each job is one message
// whose payload is kJobMagic and which carries three descriptors
// (SCM_RIGHTS): a stream socket the job is read from, the report pipe that
// becomes the monitor's stdout, and the go socket that becomes its stdin.
// The job read from the stream socket up to EOF is a sequence of
// NUL-terminated strings: ARGC, ARGC monitor arguments (as on the command
// line, without argv[0]), ENVC, ENVC "KEY=VALUE" entries (the command's
// environment), CWD. Among the arguments, kJobCgroup DIR: the command's
// own (empty) cgroup, which it joins between fork and exec; kJobStdin pipe:
// its stdin is the record's FIFO. Changing any of this needs a new kJobMagic: a server
// of the previous build ignores jobs it does not know.
//
// The monitor's report lines, on the report pipe: "forked PID" (server
// only), then "ok PID"; or "err ERRNO MESSAGE" in place of either.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace sup {

inline constexpr char kJobMagic[] = "sbxfs-monitor-job 3";
inline constexpr std::size_t kJobMagicLen = sizeof kJobMagic - 1;
/// The descriptors a job message carries: job stream, report pipe, go socket.
inline constexpr std::size_t kJobFds = 3;

/// The monitor argument naming the command's cgroup (absent: none).
inline constexpr const char* kJobCgroup = "--cgroup";
/// `--stdin pipe`: the command's stdin is the record's `stdin` FIFO (absent: /dev/null).
inline constexpr const char* kJobStdin = "--stdin";
inline constexpr const char* kJobStdinPipe = "pipe";

inline constexpr const char* kReportForked = "forked";
inline constexpr const char* kReportOk = "ok";
inline constexpr const char* kReportErr = "err";

/// The job's bytes.
std::string encode_job(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                       const std::string& cwd);

/// A job split into its strings, each pointing into the job's buffer.
struct JobParts {
  std::vector<char*> args, env;
  const char* cwd = nullptr;
};
/// Splits `job` in place; false when it is not well-formed.
bool parse_job(std::string& job, JobParts* out);

}  // namespace sup
