#pragma once
// A start between its claim and its outcome: what start_transaction.cpp
// and start_queue.cpp (a queued record's start) share.
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>

#include "supervisor/supervisor_impl.hpp"

namespace sup {

/// A start between its claim and its outcome (start_async). Made on the
/// caller's thread; once handed to the event loop, touched only there.
struct Supervisor::Impl::Starting {
  std::uint64_t token = 0;
  std::string id;
  StartSpec spec;
  bool replacing = false;   // a named slot or ended command of that name is replaced
  std::string old_script;   // the replaced record's script file
  // The replaced record, set aside at publish until the start commits, so
  // that a start that fails after it was published puts it back.
  std::string replaced_dir;
  std::optional<Record> replaced;
  std::string tmp_dir, final_dir;
  std::unique_ptr<PendingLaunch> launch;
  bool let_go = false;      // the command may have exec'd: giving up means killing it
  bool published = false;   // the record is listed
  MonitorInfo monitor;      // from monitor.json, once published
  Cgroup cg;                // the command's cgroup, made before the monitor starts; empty: none
  std::uint64_t timer = 0;  // the current report's deadline
  StartDone done;
  StartPublished on_published;  // told before the go (start_async's callers only)
  std::atomic<bool> stop_asked{false};
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
  bool queue_full = false;  // claim(): no place now, and the request may wait (queue: true)
  bool from_queue = false;  // a queued record's start: its folder is procs/<id> already, and stays
};


}  // namespace sup
