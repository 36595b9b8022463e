#pragma once
// Readiness conditions of single readers (`procs/ID/ready,readyPort=N`):
// probed like a record's own condition (ReadinessProbe), but for one reader
// alone; any number of readers may each probe their own condition on the
// same command. A reader whose condition is a copy of the record's also
// holds when the record's does (held()).
//
// add() and cancel() may be called from any thread; output(), finish() and
// clear() belong to the event loop's thread, where the probes live.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "supervisor/event_loop.hpp"
#include "supervisor/log_watch.hpp"
#include "supervisor/ready_condition.hpp"

namespace sup {

class ReadinessProbe;

class ReaderProbes {
 public:
  using OnReady = std::function<void(const ReadyMatch&)>;

  using WantOutput = std::function<void(const std::string& id)>;
  /// The condition the record's own probe checks now, if it runs (loop thread).
  using RecordProbe = std::function<std::optional<ReadyCondition>(const std::string& id)>;

  /// `logs`: the commands' LogWatches (shared with the records' probes);
  /// `want_output`: called before a log condition's probe first looks, so
  /// that the command's writes are reported from then on; `record_probe`:
  /// a reader of a port or http condition the record's probe checks is
  /// answered by that probe (held()) and connects to nothing itself, so
  /// that a server sees one series of tries however many wait.
  ReaderProbes(EventLoop& loop, LogWatches& logs, WantOutput want_output, RecordProbe record_probe)
      : loop_(loop), logs_(logs), want_output_(std::move(want_output)), record_probe_(std::move(record_probe)) {}

  /// Where the command of a reader's condition is, as the loop thread sees it.
  enum class Stage { over, queued, running };
  /// Starts probing `c` for command `id` (its folder `dir`), soon, on
  /// the loop thread, if `stage` says it runs by then; one still queued is
  /// probed from its start (started()). `on_ready` runs at most once, on
  /// the loop thread, and never once cancel() of the token has returned; it
  /// must not call cancel(). Returns the token.
  std::uint64_t add(const std::string& id, ReadyCondition c, std::string dir, OnReady on_ready,
                    std::function<Stage()> stage);
  /// The queued command `id` has started: its readers' probes begin, after
  /// the record's own (loop thread; post it after start_probe).
  void started(const std::string& id);
  /// Stops the probe of `token`; waits for an on_ready that is running.
  void cancel(std::uint64_t token);

  /// `c` holds on `id` (the record's own probe found `m`): the readers
  /// probing the same condition are answered with it now (loop thread).
  void held(const std::string& id, const ReadyCondition& c, const ReadyMatch& m);
  /// The record's own probe of `id` changed (a new condition) or stopped:
  /// readers that leaned on it for another condition probe it themselves.
  void record_probe_changed(const std::string& id);  // loop thread
  void output(const std::string& id);  ///< the folder of `id` changed (loop thread)
  void finish(const std::string& id);  ///< `id` ended: probing stops (loop thread)
  void clear();                        ///< drops every probe (loop thread)
  /// Whether a probe of `id` waits for its output (loop thread).
  bool watching(const std::string& id) const;

 private:
  /// What a probe's callback and cancel() share: cancel() empties `fn`
  /// under `mu`, so no callback starts after it.
  struct Guard {
    std::mutex mu;
    OnReady fn;  // guarded by mu
  };
  struct Probe {
    std::string id;
    ReadyCondition cond;
    std::shared_ptr<Guard> guard;
    std::shared_ptr<ReadinessProbe> probe;  ///< null: the record's probe answers it, or not begun
    std::string dir;
    bool waits_for_start = false;            ///< the command is queued: begun by started()
  };
  /// Begins the probe of `token` unless the record's probe checks the same
  /// port or http condition (loop thread).
  void begin(std::uint64_t token, Probe& p);
  /// Starts the probe of `token`'s reader (loop thread).
  void start(std::uint64_t token, Probe& p);
  void erase(std::uint64_t token);  // loop thread
  void fire(std::uint64_t token, const std::shared_ptr<Guard>& guard, const ReadyMatch& m);  // loop thread
  template <class Fn>
  void each_of(const std::string& id, Fn fn);  // loop thread

  EventLoop& loop_;
  LogWatches& logs_;
  WantOutput want_output_;
  RecordProbe record_probe_;
  std::atomic<std::uint64_t> next_{1};
  std::mutex mu_;
  std::map<std::uint64_t, std::shared_ptr<Guard>> guards_;  // guarded by mu_
  std::map<std::uint64_t, Probe> probes_;                   // loop thread only
  // The probes of notify conditions, the only ones a change of the folder
  // concerns (log conditions are their LogWatch's): output() looks at
  // these alone, not at every reader's probe at every chunk of output.
  std::set<std::uint64_t> notify_;  // loop thread only
};

}  // namespace sup
