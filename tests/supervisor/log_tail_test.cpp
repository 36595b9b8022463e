// Past log_max (supervisor/log_index.hpp, log_view.hpp): a record's head,
// its rotating tail segments written here as the monitor writes them, and
// what readers make of them while the segments come and go.
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "supervisor/log_view.hpp"
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::LogChunk;
using sup::LogIndex;
using sup::LogSelection;
using sup::LogStream;
using sup::LogView;

/// Writes a record's log files the way sbxfs-monitor does.
class FakeMonitor {
 public:
  FakeMonitor(std::string dir, std::uint64_t log_max) : dir_(std::move(dir)), log_max_(log_max) {
    write_file(dir_ + "/index", sup::encode_index_header(kRun));
    write_file(dir_ + "/log", "");
  }
  static constexpr std::uint64_t kRun = 0x77;

  void head(LogStream s, const std::string& bytes) { add("log", "index", s, bytes, head_bytes_); }
  /// The head is complete; the tail begins.
  void begin_tail() {
    head_end_ = out_ + err_;
    append(dir_ + "/index", sup::encode_index_entry(LogChunk{head_bytes_, time_, 0, LogStream::continued}));
  }
  /// `older_build`: the header without all_before, as monitors of an older
  /// build (still running after an upgrade) write it.
  void segment(std::uint64_t g, bool older_build = false) {
    write_file(dir_ + "/" + sup::tail_data_name(g), "");
    std::string header = sup::encode_tail_header({kRun, g, head_end_, chunks_, out_, err_, log_max_, out_ + err_});
    if (older_build) {
      header.resize(sup::kTailHeaderSizeV1);
      std::memcpy(header.data(), sup::kTailMagicV1, sizeof sup::kTailMagicV1);
    }
    write_file(dir_ + "/" + sup::tail_index_name(g), header);
    seg_bytes_ = 0;
    gen_ = g;
  }
  void tail(LogStream s, const std::string& bytes) {
    add(sup::tail_data_name(gen_), sup::tail_index_name(gen_), s, bytes, seg_bytes_);
  }
  void remove(std::uint64_t g) {
    ::unlink((dir_ + "/" + sup::tail_index_name(g)).c_str());
    ::unlink((dir_ + "/" + sup::tail_data_name(g)).c_str());
  }
  /// Output read and never written (a segment pushed out at once).
  void skip(LogStream s, std::uint64_t n) {
    (s == LogStream::err ? err_ : out_) += n;
    ++chunks_;
  }

 private:
  static void append(const std::string& path, const std::string& bytes) { write_file(path, read_file(path) + bytes); }
  void add(const std::string& data, const std::string& index, LogStream s, const std::string& bytes, std::uint64_t& at) {
    append(dir_ + "/" + data, bytes);
    append(dir_ + "/" + index, sup::encode_index_entry(LogChunk{at, ++time_, static_cast<std::uint32_t>(bytes.size()), s}));
    at += bytes.size();
    (s == LogStream::err ? err_ : out_) += bytes.size();
    ++chunks_;
  }

  std::string dir_;
  std::uint64_t log_max_;
  std::uint64_t head_bytes_ = 0, seg_bytes_ = 0, gen_ = 0;
  std::uint64_t out_ = 0, err_ = 0, chunks_ = 0, head_end_ = 0;
  std::int64_t time_ = 1000;
};

std::string whole(const LogIndex& idx, LogView& v) {
  v.settle(idx);
  std::string out;
  EXPECT_EQ(v.read(idx, 0, static_cast<std::size_t>(v.size(idx)), &out), 0);
  return out;
}

const std::string kMarker = sup::log_marker_line(40);

class LogTailTest : public ::testing::Test {
 protected:
  TempDir tmp_{"sbx-tail"};
  FakeMonitor mon_{tmp_.path(), 40};

  /// stdout: `head` in the head, a dropped segment, then `kept` in the
  /// tail; each a chunk of its own.
  void gap_in_chunks(const std::vector<std::string>& head, const std::vector<std::string>& kept) {
    for (const std::string& c : head) mon_.head(LogStream::out, c);
    mon_.begin_tail();
    mon_.segment(1);
    mon_.tail(LogStream::out, "gone");
    mon_.segment(2);
    for (const std::string& c : kept) mon_.tail(LogStream::out, c);
    mon_.segment(3);
    mon_.remove(1);
  }
  void gap_between(const std::string& head, const std::string& kept) {
    gap_in_chunks({head}, {kept});
  }
};

TEST_F(LogTailTest, HeadThenAMarkerThenWhatWasKept) {
  mon_.head(LogStream::out, "head1\n");
  mon_.head(LogStream::err, "e\n");
  mon_.begin_tail();
  mon_.segment(1);
  mon_.tail(LogStream::out, "gone\n");
  mon_.segment(2);
  mon_.tail(LogStream::out, "kept1\n");
  mon_.tail(LogStream::err, "err2\n");
  mon_.segment(3);
  mon_.tail(LogStream::out, "last\n");
  mon_.remove(1);

  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  EXPECT_TRUE(idx.tail_begun());
  EXPECT_EQ(idx.log_max(), 40u);
  EXPECT_EQ(idx.head_chunks(), 2u);
  EXPECT_EQ(idx.kept_from(), 3u) << "chunk 2 went with segment 1";
  EXPECT_EQ(idx.end(), 6u);
  EXPECT_EQ(idx.chunk(2), nullptr);
  ASSERT_NE(idx.chunk(5), nullptr);
  EXPECT_EQ(idx.position(5, LogSelection::out), 17u);
  EXPECT_EQ(idx.dropped(), 5u);
  EXPECT_EQ(idx.size(LogSelection::all), 8u + 5 + 6 + 5 + 5);
  std::string s;
  ASSERT_EQ(idx.read(LogSelection::all, 13, 100, &s), 0);
  EXPECT_EQ(s, "kept1\nerr2\nlast\n") << "across two segments";
  ASSERT_EQ(idx.read(LogSelection::all, 8, 100, &s), 0);
  EXPECT_EQ(s, "") << "dropped";
  EXPECT_EQ(sup::tail_dropped_bytes(tmp_.path()), 5u);
  EXPECT_TRUE(sup::head_continued(tmp_.path()));

  LogView all(LogSelection::all, {}), out(LogSelection::out, {}), err(LogSelection::err, {});
  EXPECT_EQ(whole(idx, all), "head1\ne\n" + kMarker + "kept1\nerr2\nlast\n");
  EXPECT_EQ(whole(idx, out), "head1\n" + kMarker + "kept1\nlast\n");
  EXPECT_EQ(whole(idx, err), "e\nerr2\n") << "stderr lost nothing: no marker";
  EXPECT_EQ(sup::log_view_end(tmp_.path(), LogSelection::all, 10, {}, 0, false).value_or("?"), "err2\nlast\n");
}

TEST_F(LogTailTest, AnOlderBuildsSegmentsAreRead) {
  mon_.head(LogStream::out, "head1\n");
  mon_.begin_tail();
  for (std::uint64_t g : {1, 2, 3}) {
    mon_.segment(g, true);
    mon_.tail(LogStream::out, g == 1 ? "gone\n" : g == 2 ? "kept\n" : "last\n");
  }
  mon_.remove(1);
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  EXPECT_EQ(idx.dropped(), 5u);
  EXPECT_EQ(sup::tail_dropped_bytes(tmp_.path()), 5u);
  LogView all(LogSelection::all, {});
  EXPECT_EQ(whole(idx, all), "head1\n" + kMarker + "kept\nlast\n");
}

TEST_F(LogTailTest, AFollowerAtTheEndKeepsFollowingWhileTheTailRotates) {
  mon_.head(LogStream::out, "0123456789");
  mon_.begin_tail();
  mon_.segment(1);
  mon_.tail(LogStream::out, "aaaaa");
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  LogView v(LogSelection::all, {});
  EXPECT_EQ(whole(idx, v), "0123456789aaaaa");
  v.served(0, 15, 'a');
  // Two rotations: segment 1 goes, after the follower read it all.
  mon_.segment(2);
  mon_.tail(LogStream::out, "bbbbb");
  mon_.segment(3);
  mon_.tail(LogStream::out, "cc");
  mon_.remove(1);
  ASSERT_EQ(idx.refresh(), 0);
  v.settle(idx);
  std::string s;
  ASSERT_EQ(v.read(idx, 15, 100, &s), 0);
  EXPECT_EQ(s, "bbbbbcc") << "no marker, no byte lost or repeated";
  EXPECT_EQ(v.size(idx), 22u);
  EXPECT_FALSE(v.has_gap());
  // A new reader sees the gap.
  LogView fresh(LogSelection::all, {});
  EXPECT_EQ(whole(idx, fresh), "0123456789\n" + kMarker + "bbbbbcc");
}

TEST_F(LogTailTest, AReaderThatFellBehindGetsAMarkerWhereItWas) {
  mon_.head(LogStream::out, "head\n");
  mon_.begin_tail();
  mon_.segment(1);
  mon_.tail(LogStream::out, "one\ntwo\n");
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  LogView v(LogSelection::all, {});
  v.settle(idx);
  std::string s;
  ASSERT_EQ(v.read(idx, 0, 9, &s), 0);
  EXPECT_EQ(s, "head\none\n");
  v.served(0, 9, '\n');
  mon_.segment(2);
  mon_.tail(LogStream::out, "three\n");
  mon_.segment(3);
  mon_.tail(LogStream::out, "four\n");
  mon_.remove(1);
  ASSERT_EQ(idx.refresh(), 0);
  v.settle(idx);
  ASSERT_EQ(v.read(idx, 9, 1000, &s), 0);
  EXPECT_EQ(s, kMarker + "three\nfour\n") << "the rest of segment 1 is gone: a marker where the reader was";
  EXPECT_EQ(v.read(idx, 5, 4, &s), ENODATA) << "what it read before is gone";
  ASSERT_EQ(v.read(idx, 0, 5, &s), 0);
  EXPECT_EQ(s, "head\n") << "the head stays";
}

TEST_F(LogTailTest, SegmentsComeAndGoBetweenTwoLooks) {
  mon_.head(LogStream::out, "h");
  mon_.begin_tail();
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  EXPECT_EQ(idx.size(LogSelection::all), 1u) << "the tail has begun, nothing in it yet";
  // A segment whose header is not written yet is not there.
  write_file(tmp_ / sup::tail_index_name(1), "");
  write_file(tmp_ / sup::tail_data_name(1), "");
  ASSERT_EQ(idx.refresh(), 0);
  EXPECT_EQ(idx.end(), 1u);
  mon_.segment(1);
  mon_.tail(LogStream::err, "x");
  mon_.segment(2);
  mon_.tail(LogStream::err, "y");
  mon_.segment(3);
  mon_.remove(1);
  mon_.tail(LogStream::err, "z");
  mon_.segment(4);
  mon_.remove(2);
  mon_.tail(LogStream::err, "w");
  ASSERT_EQ(idx.refresh(), 0);
  EXPECT_EQ(idx.kept_start(LogSelection::err), 2u);
  std::string s;
  ASSERT_EQ(idx.read(LogSelection::err, 2, 10, &s), 0);
  EXPECT_EQ(s, "zw");
  // Every segment read so far removed: the folder says which there are.
  mon_.segment(5);
  mon_.tail(LogStream::err, "v");
  mon_.segment(6);
  mon_.tail(LogStream::err, "u");
  mon_.remove(3);
  mon_.remove(4);
  ASSERT_EQ(idx.refresh(), 0);
  ASSERT_EQ(idx.read(LogSelection::err, idx.kept_start(LogSelection::err), 10, &s), 0);
  EXPECT_EQ(s, "vu");
  EXPECT_EQ(idx.dropped(), 4u);
}

TEST_F(LogTailTest, SkippedOutputCountsAsDropped) {
  mon_.head(LogStream::out, "h\n");
  mon_.begin_tail();
  mon_.skip(LogStream::out, 100);
  mon_.segment(1);
  mon_.tail(LogStream::out, "end\n");
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  EXPECT_EQ(idx.dropped(), 100u);
  EXPECT_EQ(idx.kept_from(), 2u) << "the skipped bytes have a number of their own";
  LogView v(LogSelection::out, {});
  EXPECT_EQ(whole(idx, v), "h\n" + kMarker + "end\n");
}

TEST_F(LogTailTest, SecretsCutByTheGapAreMaskedOnBothSides) {
  gap_between("token hun", "ter2 and hunter2 again");
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  LogView v(LogSelection::all, {"hunter2"});
  EXPECT_EQ(whole(idx, v), "token ***\n" + kMarker + "**** and ******* again");
  EXPECT_EQ(sup::log_view_end(tmp_.path(), LogSelection::all, 13, {"hunter2"}, 0, false), "******* again");
}

TEST_F(LogTailTest, AGlobalSecretsReachIsMaskedAtTheGapWhateverTheBytes) {
  // With a blind reach (the global secrets'), the bytes of the lines the
  // gap cuts are masked up to that reach, a guess at the secret or not.
  gap_between("line\ntoken xyz", "abcdefghij rest\nnext");
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  LogView v(LogSelection::all, {"hunter2"}, LogView::Masking::bytes, 6);
  EXPECT_EQ(whole(idx, v), "line\ntok******\n" + kMarker + "******ghij rest\nnext");
  LogView plain(LogSelection::all, {"hunter2"});
  EXPECT_EQ(whole(idx, plain), "line\ntoken xyz\n" + kMarker + "abcdefghij rest\nnext");
}

TEST_F(LogTailTest, AGapsEdgesAreMaskedWhateverPartOfThemARangeHolds) {
  // The head ends "hu" | "n", the kept bytes begin "te" | "r2": a range of
  // one chunk, as `events` and the timestamped views read them, gets its
  // share of the masking that the edge's bytes together call for.
  gap_in_chunks({"token hu", "n"}, {"te", "r2 and hunter2"});
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  const std::uint64_t head = idx.head_size(LogSelection::out), kept = idx.kept_start(LogSelection::out);
  ASSERT_EQ(head, 9u);
  auto masked = [&](std::uint64_t lo, std::size_t n) {
    std::string b;
    EXPECT_EQ(idx.read(LogSelection::out, lo, n, &b), 0);
    sup::mask_gap_edges(idx, LogSelection::out, lo, b, {"hunter2"}, 0);
    return b;
  };
  EXPECT_EQ(masked(0, 8), "token **");
  EXPECT_EQ(masked(8, 1), "*");
  EXPECT_EQ(masked(kept, 2), "**");
  EXPECT_EQ(masked(kept + 2, 14), "** and hunter2") << "the whole secret is for the usual masking";
  EXPECT_EQ(masked(kept + 4, 4), " and") << "past the edge";
  // Nothing dropped: nothing to mask.
  TempDir other{"sbx-tail-none"};
  FakeMonitor m(other.path(), 40);
  m.head(LogStream::out, "token hun");
  LogIndex plain;
  ASSERT_EQ(plain.open(other.path()), 0);
  std::string b = "token hun";
  sup::mask_gap_edges(plain, LogSelection::out, 0, b, {"hunter2"}, 0);
  EXPECT_EQ(b, "token hun");
}

TEST_F(LogTailTest, NoTailNoMarker) {
  mon_.head(LogStream::out, "a");
  mon_.head(LogStream::err, "b");
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  EXPECT_FALSE(idx.tail_begun());
  EXPECT_FALSE(sup::head_continued(tmp_.path()));
  EXPECT_EQ(sup::tail_dropped_bytes(tmp_.path()), std::nullopt);
  LogView v(LogSelection::all, {});
  EXPECT_EQ(whole(idx, v), "ab");
}

TEST(LogCaps, HalfForTheHeadAQuarterASegment) {
  EXPECT_EQ(sup::log_caps(65536).head, 32768u);
  EXPECT_EQ(sup::log_caps(65536).segment, 16384u);
  EXPECT_EQ(sup::log_caps(1).head, 1u);
  EXPECT_GE(sup::log_caps(1).segment, 1u);
  EXPECT_EQ(sup::entry_cap(32768), 1365u);
  EXPECT_EQ(sup::entry_cap(100), 64u);
}


/// What `ranges` of `file` hold, one after another.
std::string bytes_of(const sup::UniqueFd& file, const std::vector<LogView::FileRange>& ranges) {
  std::string out;
  for (const auto& r : ranges) {
    std::string part(r.size, '\0');
    EXPECT_EQ(::pread(file.get(), part.data(), part.size(), static_cast<off_t>(r.off)), static_cast<ssize_t>(r.size));
    out += part;
  }
  return out;
}

TEST(LogViewLocateTest, AStreamsBytesAreItsChunksInOneFileWithoutACopy) {
  TempDir tmp{"sbx-locate"};
  FakeMonitor mon(tmp.path(), 0);
  mon.head(LogStream::out, "out1\n");
  mon.head(LogStream::err, "err1\n");
  mon.head(LogStream::out, "out2\n");
  mon.head(LogStream::out, "out3\n");  // right after out2 in the file: one range with it
  mon.head(LogStream::err, "err2\n");
  mon.head(LogStream::out, "out4\n");
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp.path()), 0);
  LogView out(LogSelection::out, {});
  out.settle(idx);
  std::shared_ptr<const sup::UniqueFd> file;
  std::vector<LogView::FileRange> ranges;
  ASSERT_TRUE(out.locate(idx, 2, 16, 8, &file, &ranges));
  ASSERT_EQ(ranges.size(), 3u) << "out1's end, out2+out3, out4's start";
  EXPECT_EQ(bytes_of(*file, ranges), "t1\nout2\nout3\nout");
  // The view's end is a short read; past it, nothing.
  ASSERT_TRUE(out.locate(idx, 15, 100, 8, &file, &ranges));
  EXPECT_EQ(bytes_of(*file, ranges), "out4\n");
  EXPECT_FALSE(out.locate(idx, 20, 10, 8, &file, &ranges));
  // More ranges than allowed: the caller copies instead.
  EXPECT_FALSE(out.locate(idx, 0, 20, 2, &file, &ranges));
  // Masked bytes are never sent from the file.
  LogView masked(LogSelection::out, {"out2"});
  masked.settle(idx);
  EXPECT_FALSE(masked.locate(idx, 0, 20, 8, &file, &ranges));
}

TEST(LogViewLocateTest, ARangeNeverCrossesAMarker) {
  TempDir tmp{"sbx-locate"};
  FakeMonitor mon(tmp.path(), 40);
  mon.head(LogStream::out, "head1\n");
  mon.begin_tail();
  mon.segment(1);
  mon.tail(LogStream::out, "gone\n");
  mon.segment(2);
  mon.tail(LogStream::out, "kept\n");
  mon.remove(1);
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp.path()), 0);
  LogView out(LogSelection::out, {});
  out.settle(idx);
  ASSERT_EQ(whole(idx, out), "head1\n" + kMarker + "kept\n");
  std::shared_ptr<const sup::UniqueFd> file;
  std::vector<LogView::FileRange> ranges;
  EXPECT_FALSE(out.locate(idx, 0, 10, 8, &file, &ranges)) << "the head, then the marker";
  ASSERT_TRUE(out.locate(idx, 0, 6, 8, &file, &ranges));
  EXPECT_EQ(bytes_of(*file, ranges), "head1\n");
  const std::uint64_t kept = 6 + kMarker.size();
  ASSERT_TRUE(out.locate(idx, kept, 100, 8, &file, &ranges));
  EXPECT_EQ(bytes_of(*file, ranges), "kept\n") << "in the tail segment";
}

}  // namespace
