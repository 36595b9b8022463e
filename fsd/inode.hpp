#pragma once
// Inodes are computed, not allocated. The root and the fixed files of the
// root are small constants; the files of a command are
//     (serial + 1) << kRecordKindBits | kind
// where serial is sup::CommandStatus::serial (stable per bgId for the daemon's
// life, never reused), so the same file keeps its inode across lookups and the
// FUSE side needs no table of nodes. Which name, mode and handler each kind
// has is in the table of the tree's files (tree_file.hpp). Scratch files (created by writers,
// renamed away) are the exception: see kScratchInoBit. Every call maps the inode back to a bgId
// and re-checks that the record still exists (a vanished command is ENOENT).
#include <cstddef>
#include <cstdint>
#include <optional>

#include <fuse_lowlevel.h>

namespace fsd {

enum class Kind : std::uint8_t {
  // Fixed files: their inode is the value itself (1 is FUSE_ROOT_ID).
  root = 1,
  readme,
  cmd,
  status,
  errors,
  procs,
  logs,
  box_steps,  // steps.json at the root
  fixed_end,  // not a file: a new fixed kind goes before it
  scratch = 15,  // a scratch file (scratch_files.hpp): inode kScratchInoBit | counter
  // Files of one command: the low kRecordKindBits bits of its inodes.
  record_dir = 16,
  record_cmd,
  record_status,
  log,          // procs/ID/log
  stdout_log,   // procs/ID/stdout
  stderr_log,   // procs/ID/stderr
  tail,
  wait,
  stop,
  signal,
  logs_entry,   // logs/ID.log
  ready,
  output,       // procs/ID/output
  steps,        // procs/ID/steps (sbx-step writes events here)
  steps_json,   // procs/ID/steps.json
  events,       // procs/ID/events
  stdin_pipe,   // procs/ID/stdin
  record_end,   // not a file: a new kind of a command's file goes before it
};

/// How many low bits of a command's inodes say which of its files it is:
/// the one place that sets how many kinds a command's files may have.
constexpr unsigned kRecordKindBits = 6;
constexpr std::uint64_t kRecordKindMask = (std::uint64_t{1} << kRecordKindBits) - 1;
/// Kinds a command's inodes can hold (the kinds below record_dir are fixed ones).
constexpr std::size_t kKindSlots = std::size_t{1} << kRecordKindBits;

/// The last fixed kind (its inode is the value itself).
constexpr Kind kLastFixedKind = static_cast<Kind>(static_cast<int>(Kind::fixed_end) - 1);
/// The last kind of a command's files (decode_ino accepts none above it).
constexpr Kind kLastRecordKind = static_cast<Kind>(static_cast<int>(Kind::record_end) - 1);
static_assert(static_cast<int>(Kind::fixed_end) <= static_cast<int>(Kind::scratch), "fixed kinds end below scratch");
static_assert(static_cast<std::size_t>(Kind::record_end) <= kKindSlots,
              "a command's kinds fit in the inode's low kRecordKindBits bits");

constexpr bool is_record_kind(Kind k) { return static_cast<int>(k) >= static_cast<int>(Kind::record_dir); }

struct InodeRef {
  Kind kind;
  std::uint64_t serial = 0;  ///< meaningful for record kinds only
};

/// Scratch files take their inodes from a counter with this bit set: a range
/// of their own, never reused, disjoint from the computed ones.
constexpr fuse_ino_t kScratchInoBit = fuse_ino_t{1} << 62;

constexpr fuse_ino_t fixed_ino(Kind k) { return static_cast<fuse_ino_t>(k); }

constexpr fuse_ino_t record_ino(std::uint64_t serial, Kind k) {
  return static_cast<fuse_ino_t>(((serial + 1) << kRecordKindBits) | (static_cast<std::uint64_t>(k) & kRecordKindMask));
}

/// The kind (and serial) an inode stands for; nullopt for an inode we never hand out.
inline std::optional<InodeRef> decode_ino(fuse_ino_t ino) {
  if (ino & kScratchInoBit) return InodeRef{Kind::scratch};
  if (ino >= static_cast<fuse_ino_t>(Kind::root) && ino <= static_cast<fuse_ino_t>(kLastFixedKind))
    return InodeRef{static_cast<Kind>(ino)};
  if (ino < kKindSlots) return std::nullopt;
  const unsigned low = static_cast<unsigned>(ino & kRecordKindMask);
  if (low < static_cast<unsigned>(Kind::record_dir) || low > static_cast<unsigned>(kLastRecordKind))
    return std::nullopt;
  return InodeRef{static_cast<Kind>(low), (static_cast<std::uint64_t>(ino) >> kRecordKindBits) - 1};
}

}  // namespace fsd
