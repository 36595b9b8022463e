#include "supervisor/monitor_launcher.hpp"

#include <cmath>
#include <sstream>

#include <boost/process.hpp>

namespace sup {

namespace bp = boost::process;

namespace {
std::string ms(double sec) { return std::to_string(static_cast<long long>(std::llround(sec * 1000))); }
}  // namespace

Result<pid_t> launch_monitor(const MonitorLaunch& l) {
  std::vector<std::string> args = {"--dir", l.record_dir, "--grace-ms", ms(l.grace_sec)};
  if (l.timeout_sec > 0) {
    args.push_back("--timeout-ms");
    args.push_back(ms(std::max(l.timeout_sec, 0.001)));
  }
  args.push_back("--");
  args.insert(args.end(), l.argv.begin(), l.argv.end());

  bp::environment env;  // the whole environment, not an overlay on ours
  for (const auto& [k, v] : l.env) env[k] = v;

  std::string line;
  try {
    bp::ipstream report;
    // The monitor forks at once and its first process exits, so wait() below
    // is short; the detached monitor reports on the pipe it inherited.
    // No bp::limit_handles: in Boost 1.74 it closes the report pipe too (the
    // child's stdout write fails with EIO). The monitor closes every fd >= 3
    // as its first act instead, so nothing of ours reaches the command.
    bp::child c(bp::exe = l.monitor_path, bp::args = args, env, bp::start_dir = l.cwd,
                bp::std_in < bp::null, bp::std_out > report, bp::std_err > bp::null);
    std::getline(report, line);
    c.wait();
  } catch (const bp::process_error& e) {
    Error err = error_from_errno(e.code().value(), "cannot run the monitor " + l.monitor_path);
    if (e.code().value() == E2BIG) err.message = "the arguments and environment are too large to run (E2BIG)";
    return err;
  } catch (const std::exception& e) {
    return Error{Errc::io_error, std::string("cannot run the monitor ") + l.monitor_path + ": " + e.what()};
  }

  std::istringstream in(line);
  std::string word;
  in >> word;
  if (word == "ok") {
    long pid = 0;
    in >> pid;
    if (pid > 0) return static_cast<pid_t>(pid);
  } else if (word == "err") {
    int err = 0;
    in >> err;
    std::string msg;
    std::getline(in, msg);
    if (!msg.empty() && msg[0] == ' ') msg.erase(0, 1);
    Error e = error_from_errno(err, "exec");
    if (!msg.empty()) e.message = msg;
    return e;
  }
  return Error{Errc::io_error, "the monitor did not report a start (got '" + line + "')"};
}

}  // namespace sup
