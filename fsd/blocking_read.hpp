#pragma once
// The machinery shared by `wait` and `ready`: the first read blocks (parked,
// no thread held) until something holds for a command, or the cap runs out;
// its answer is then fixed for this open file and served by offset, then EOF.
// An interrupted read gets EINTR at once and the retry blocks again.
// poll(): readable once the answer is ready.
//
// Per open file: its own cap (`timeoutSec=N` in the name; default the
// mount's wait_timeout) and, for Until::ready, its own condition (a
// ReaderCondition in place of the record's).
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "fsd/filesystem.hpp"
#include "fsd/opened_on.hpp"
#include "fsd/handle.hpp"
#include "fsd/parked_requests.hpp"
#include "fsd/reader_condition.hpp"

namespace fsd {

class BlockingReadHandle : public Handle {
 public:
  /// `timeoutSec` in the name of `node` (node.params), when given, is the cap.
  BlockingReadHandle(Filesystem& fs, const Node& node, Requester reader, ParkedRequests::Until until)
      : fs_(fs), id_(node.id()), reader_(reader),
        opened_(node.record), until_(until),
        cap_(fs.config().wait_timeout) {
    cap_from(node);
  }
  ~BlockingReadHandle() override;

  Reply read(fuse_req_t req, std::size_t size, off_t off) override;
  Reply poll(fuse_req_t req, fuse_pollhandle* ph, unsigned events) override;
  bool would_block() override { return !answer_ready(); }

 protected:
  /// The answer text for `why` (never gone), from the record as it is now.
  virtual std::string build(const sup::CommandStatus& st, ParkedRequests::Outcome why) = 0;
  /// What build() costs (heavy answers are built off the event thread).
  virtual ParkedRequests::Cost cost() const { return ParkedRequests::Cost::light; }
  /// Whether build() shows the record's `cpu` (else it is not sampled).
  virtual bool shows_cpu() const { return true; }

  /// How long a read blocks at most (call before the first read).
  void cap_at(std::chrono::milliseconds cap) { cap_ = cap; }
  /// `tailBytes` in the name of `node`, else `fallback`.
  static std::size_t tail_bytes_of(const Node& node, std::size_t fallback);
  /// Waits for `c` (this reader's alone) in place of the record's condition
  /// (Until::ready; call before the first read).
  void wait_for(std::unique_ptr<ReaderCondition> c) { own_ = std::move(c); }
  /// This reader's own condition; null: the record's.
  const ReaderCondition* own_condition() const { return own_.get(); }

  /// Another user's record has the name now: nothing of it is read or
  /// reached through this file (opened_on.hpp).
  bool name_taken_by_another() const { return opened_.taken(fs_.sup(), id_); }

  Filesystem& fs_;
  const std::string id_;
  const Requester reader_;  ///< who opened the file (for `mine`)
  const OpenedOn opened_;   ///< whose record it was opened on

 private:
  void cap_from(const Node& node);
  Reply answer(ParkedRequests::Outcome why, std::size_t size, off_t off);
  /// The answer is fixed already, or what it waits for holds now.
  bool answer_ready();

  const ParkedRequests::Until until_;
  std::chrono::milliseconds cap_;
  std::unique_ptr<ReaderCondition> own_;  // after the watch is gone (the destructor unwatches first)
  std::mutex mu_;
  std::optional<std::string> answer_;  // guarded by mu_
};

}  // namespace fsd
