// The table of the tree's files: every kind has one row, every name leads to
// its kind and back, inodes encode and decode, modes and cache times are the
// tree's (sbxfs.5), and the files with parameters are the table's.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fsd/tree_file.hpp"

namespace {

using fsd::Kind;
using fsd::Place;

std::vector<Kind> every_kind() {
  std::vector<Kind> out;
  for (int k = static_cast<int>(Kind::root); k <= static_cast<int>(fsd::kLastFixedKind); ++k)
    out.push_back(static_cast<Kind>(k));
  out.push_back(Kind::scratch);
  for (int k = static_cast<int>(Kind::record_dir); k <= static_cast<int>(fsd::kLastRecordKind); ++k)
    out.push_back(static_cast<Kind>(k));
  return out;
}

TEST(TreeFile, EveryKindHasItsOwnRow) {
  std::set<Kind> seen;
  for (const fsd::TreeFile& f : fsd::tree_files()) EXPECT_TRUE(seen.insert(f.kind).second) << f.name;
  EXPECT_EQ(seen.size(), every_kind().size());
  for (Kind k : every_kind()) EXPECT_EQ(fsd::tree_file(k).kind, k) << static_cast<int>(k);
}

TEST(TreeFile, EveryNameResolvesToItsKindAndBack) {
  for (const fsd::TreeFile& f : fsd::tree_files()) {
    if (f.place != Place::root && f.place != Place::record) {
      EXPECT_TRUE(f.name.empty()) << static_cast<int>(f.kind);
      continue;
    }
    ASSERT_FALSE(f.name.empty());
    const fsd::TreeFile* named = fsd::tree_file(f.place, f.name);
    ASSERT_NE(named, nullptr) << f.name;
    EXPECT_EQ(named, &fsd::tree_file(f.kind)) << f.name;
    EXPECT_EQ(f.name.find(','), std::string_view::npos) << f.name;  // a comma starts parameters
    EXPECT_EQ(f.name.find('/'), std::string_view::npos) << f.name;
  }
  EXPECT_EQ(fsd::tree_file(Place::root, "wait"), nullptr);
  EXPECT_EQ(fsd::tree_file(Place::record, "README"), nullptr);
  EXPECT_EQ(fsd::tree_file(Place::record, "Wait"), nullptr);  // names are case-sensitive
  EXPECT_EQ(fsd::tree_file(Place::root, "steps.json")->kind, Kind::box_steps);
  EXPECT_EQ(fsd::tree_file(Place::record, "steps.json")->kind, Kind::steps_json);
  EXPECT_EQ(fsd::tree_file(Place::record, "cmd")->kind, Kind::record_cmd);
}

TEST(TreeFile, ListingsKeepTheirOrder) {
  std::vector<std::string> root, record;
  for (const fsd::TreeFile& f : fsd::tree_files()) {
    if (f.place == Place::root) root.emplace_back(f.name);
    if (f.place == Place::record) record.emplace_back(f.name);
  }
  EXPECT_EQ(root, (std::vector<std::string>{"README", "cmd", "status.json", "errors", "procs", "logs", "steps.json"}));
  EXPECT_EQ(record, (std::vector<std::string>{"cmd", "status.json", "log", "stdout", "stderr", "tail", "wait",
                                              "ready", "output", "steps", "steps.json", "stop", "signal",
                                              "events", "stdin"}));
}

TEST(TreeFile, ModesAndOpeners) {
  for (const fsd::TreeFile& f : fsd::tree_files()) {
    // A directory has no opener; every file has one and some permission.
    EXPECT_EQ(S_ISDIR(f.mode), f.open == nullptr) << f.name;
    if (S_ISDIR(f.mode)) EXPECT_EQ(f.mode & 07777, 0755u) << f.name;
    else EXPECT_TRUE(S_ISREG(f.mode) && (f.mode & 0666)) << f.name;
  }
  EXPECT_EQ(fsd::mode_of(Kind::cmd), S_IFREG | 0666u);
  EXPECT_EQ(fsd::mode_of(Kind::ready), S_IFREG | 0666u);
  EXPECT_EQ(fsd::mode_of(Kind::stop), S_IFREG | 0222u);
  EXPECT_EQ(fsd::mode_of(Kind::signal), S_IFREG | 0222u);
  EXPECT_EQ(fsd::mode_of(Kind::steps), S_IFREG | 0222u);
  EXPECT_EQ(fsd::mode_of(Kind::stdin_pipe), S_IFREG | 0222u);
  EXPECT_EQ(fsd::mode_of(Kind::wait), S_IFREG | 0444u);
  EXPECT_EQ(fsd::mode_of(Kind::logs_entry), S_IFREG | 0444u);
  EXPECT_EQ(fsd::mode_of(Kind::scratch), S_IFREG | 0600u);
  EXPECT_EQ(fsd::mode_of(Kind::record_dir), S_IFDIR | 0755u);
}

TEST(TreeFile, FixedFilesAreCachedACommandsAreNot) {
  for (const fsd::TreeFile& f : fsd::tree_files()) {
    const bool fixed = !fsd::is_record_kind(f.kind) && f.kind != Kind::scratch;
    EXPECT_EQ(f.entry_timeout, fixed ? 1.0 : 0.0) << static_cast<int>(f.kind);
    // Attributes that never change (procs/ID's only with a new start) are
    // cached 1 s; those of the logs (they grow) and of scratch names are not.
    const bool changing = f.size == fsd::Size::backing || f.kind == Kind::scratch;
    EXPECT_EQ(f.attr_timeout, changing ? 0.0 : 1.0) << static_cast<int>(f.kind);
  }
}

TEST(TreeFile, TheLogViewsHaveTheirBackingFilesSize) {
  for (Kind k : {Kind::log, Kind::stdout_log, Kind::stderr_log, Kind::logs_entry})
    EXPECT_EQ(fsd::tree_file(k).size, fsd::Size::backing);
  EXPECT_EQ(fsd::tree_file(Kind::readme).size, fsd::Size::readme);
  EXPECT_EQ(fsd::tree_file(Kind::status).size, fsd::Size::zero);
  EXPECT_EQ(fsd::tree_file(Kind::events).size, fsd::Size::stream);
}

TEST(TreeFile, InodesDecodeToTheirKind) {
  for (Kind k : every_kind()) {
    if (k == Kind::scratch) continue;
    const bool record = fsd::is_record_kind(k);
    for (std::uint64_t serial : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{123456789}}) {
      const fuse_ino_t ino = record ? fsd::record_ino(serial, k) : fsd::fixed_ino(k);
      const auto ref = fsd::decode_ino(ino);
      ASSERT_TRUE(ref) << ino;
      EXPECT_EQ(ref->kind, k);
      if (record) {
        EXPECT_EQ(ref->serial, serial);
      }
    }
  }
  EXPECT_EQ(fsd::fixed_ino(Kind::root), fuse_ino_t{FUSE_ROOT_ID});
  EXPECT_EQ(fsd::record_ino(0, Kind::record_dir), fuse_ino_t{(1u << fsd::kRecordKindBits) | 16u});
  EXPECT_EQ(fsd::record_ino(5, Kind::stdin_pipe) >> fsd::kRecordKindBits, fuse_ino_t{6});
  EXPECT_EQ(fsd::decode_ino(fsd::kScratchInoBit | 7)->kind, Kind::scratch);
  EXPECT_FALSE(fsd::decode_ino(0));
  EXPECT_FALSE(fsd::decode_ino(static_cast<fuse_ino_t>(Kind::fixed_end)));
  EXPECT_FALSE(fsd::decode_ino((1u << fsd::kRecordKindBits) | 3u));  // a fixed kind in a record's bits
  if (static_cast<std::size_t>(Kind::record_end) < fsd::kKindSlots) {
    EXPECT_FALSE(fsd::decode_ino((1u << fsd::kRecordKindBits) | static_cast<unsigned>(Kind::record_end)));
  }
  // Every kind a command's files may have keeps its own inode (no two share the low bits).
  for (Kind a : every_kind())
    for (Kind b : every_kind())
      if (a != b && fsd::is_record_kind(a) && fsd::is_record_kind(b)) {
        EXPECT_NE(fsd::record_ino(7, a), fsd::record_ino(7, b));
      }
}

TEST(TreeFile, TheFilesWithParametersAreTheTables) {
  std::size_t with_keys = 0;
  for (const fsd::TreeFile& f : fsd::tree_files()) {
    if (f.keys.empty()) continue;
    ++with_keys;
    const fsd::ParamDir dir = f.place == Place::root ? fsd::ParamDir::root : fsd::ParamDir::record;
    const fsd::ParamFile* row = fsd::find_param_file(dir, f.name);
    ASSERT_NE(row, nullptr) << f.name;
    EXPECT_EQ(row->keys.data(), f.keys.data());
  }
  EXPECT_EQ(fsd::param_files().size(), with_keys);
  EXPECT_EQ(fsd::find_param_file(fsd::ParamDir::record, "signal"), nullptr);
  // The log views take ,follow and ,timestamps; events takes since= and follow.
  for (const char* view : {"log", "stdout", "stderr"})
    EXPECT_EQ(fsd::find_param_file(fsd::ParamDir::record, view)->keys.data(), fsd::param_keys::log) << view;
  EXPECT_EQ(fsd::find_param_file(fsd::ParamDir::record, "events")->keys.data(), fsd::param_keys::events);
  EXPECT_EQ(fsd::find_param_file(fsd::ParamDir::record, "stdin")->keys.data(), fsd::param_keys::stdin_file);
  // Every key set is some file's.
  for (const std::span<const fsd::ParamKey> keys : fsd::param_keys::all) {
    bool used = false;
    for (const fsd::ParamFile& f : fsd::param_files()) used = used || f.keys.data() == keys.data();
    EXPECT_TRUE(used) << keys.front().name;
  }
}

}  // namespace
