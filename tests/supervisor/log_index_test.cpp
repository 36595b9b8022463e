// The log's index (supervisor/log_index.hpp): written as the monitor does,
// read back as it grows; streams, torn entries, characters cut at a chunk's end.
#include "tests/supervisor/test_util.hpp"

namespace {

using namespace sbxtest;
using sup::LogChunk;
using sup::LogIndex;
using sup::LogStream;

class LogIndexTest : public ::testing::Test {
 protected:
  TempDir tmp_{"sbx-index"};
  std::string log_, index_;

  void SetUp() override { index_ = sup::encode_index_header(0x1234abcdu); }
  void chunk(LogStream s, const std::string& bytes, std::int64_t us) {
    index_ += sup::encode_index_entry(LogChunk{log_.size(), us, static_cast<std::uint32_t>(bytes.size()), s});
    log_ += bytes;
  }
  void flush() {
    write_file(tmp_ / "log", log_);
    write_file(tmp_ / "index", index_);
  }
  /// Stream `s` as the index gives it.
  static std::string all_of(const LogIndex& idx, LogStream s) {
    std::string out;
    EXPECT_EQ(idx.read_stream(s, 0, 100, &out), 0);
    return out;
  }
};

TEST_F(LogIndexTest, StreamsAreTheirChunksInOrder) {
  chunk(LogStream::out, "o1\n", 10);
  chunk(LogStream::err, "e1\n", 20);
  chunk(LogStream::out, "o2\n", 30);
  flush();
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  EXPECT_EQ(idx.run_id(), 0x1234abcdu);
  ASSERT_EQ(idx.chunks().size(), 3u);
  EXPECT_EQ(idx.chunks()[1].offset, 3u);
  EXPECT_EQ(idx.chunks()[2].time_us, 30);
  EXPECT_EQ(idx.stream_size(LogStream::out), 6u);
  EXPECT_EQ(idx.position(2, sup::LogSelection::out), 3u);
  EXPECT_EQ(all_of(idx, LogStream::out), "o1\no2\n");
  std::string s;
  ASSERT_EQ(idx.read_stream(LogStream::out, 2, 2, &s), 0);
  EXPECT_EQ(s, "\no");
  EXPECT_EQ(all_of(idx, LogStream::err), "e1\n");
  std::uint64_t at = 0, run = 0;
  std::shared_ptr<const sup::UniqueFd> file;
  ASSERT_TRUE(idx.locate(sup::LogSelection::out, 4, &file, &at, &run));
  EXPECT_EQ(at, 7u);
  EXPECT_EQ(run, 2u);
  EXPECT_EQ(file->get(), idx.log_fd());
  EXPECT_FALSE(idx.locate(sup::LogSelection::out, 6, &file, &at, &run));
}

TEST_F(LogIndexTest, ATornEntryWaitsForTheRest) {
  chunk(LogStream::out, "a", 1);
  chunk(LogStream::err, "b", 2);
  const std::string whole = index_;
  index_.resize(index_.size() - 5);
  flush();
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  EXPECT_EQ(idx.chunks().size(), 1u);
  write_file(tmp_ / "index", whole);
  ASSERT_EQ(idx.refresh(), 0);
  EXPECT_EQ(idx.chunks().size(), 2u);
  EXPECT_EQ(idx.stream_size(LogStream::err), 1u);
}

TEST_F(LogIndexTest, NoIndexOrNotAnIndex) {
  LogIndex idx;
  EXPECT_EQ(idx.open(tmp_.path()), ENOENT);
  write_file(tmp_ / "index", "not an index at all");
  write_file(tmp_ / "log", "");
  EXPECT_EQ(idx.open(tmp_.path()), EBADMSG);
  // Cut inside its header beside a log: damaged.
  write_file(tmp_ / "index", sup::encode_index_header(7).substr(0, 5));
  EXPECT_EQ(idx.open(tmp_.path()), EBADMSG);
  // Made, its header not written yet, and no log yet (or torn, about to
  // go): none yet, not a damaged index (a reader between the two got EIO).
  std::filesystem::remove(tmp_ / "log");
  write_file(tmp_ / "index", "");
  EXPECT_EQ(idx.open(tmp_.path()), ENOENT);
  write_file(tmp_ / "index", sup::encode_index_header(7).substr(0, 5));
  EXPECT_EQ(idx.open(tmp_.path()), ENOENT);
  write_file(tmp_ / "index", sup::encode_index_header(7));
  write_file(tmp_ / "log", "");
  EXPECT_EQ(idx.open(tmp_.path()), 0);
}

TEST_F(LogIndexTest, AMarkerChunkIsInBothStreams) {
  chunk(LogStream::out, "x", 1);
  chunk(LogStream::marker, "[m]\n", 2);
  chunk(LogStream::err, "y", 3);
  flush();
  LogIndex idx;
  ASSERT_EQ(idx.open(tmp_.path()), 0);
  EXPECT_EQ(all_of(idx, LogStream::out), "x[m]\n");
  EXPECT_EQ(all_of(idx, LogStream::err), "[m]\ny");
}

TEST(IncompleteUtf8Tail, CountsTheStartOfACutCharacter) {
  EXPECT_EQ(sup::incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(sup::incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(sup::incomplete_utf8_tail("a\xc3"), 1u);
  EXPECT_EQ(sup::incomplete_utf8_tail("a\xc3\xa9"), 0u);
  EXPECT_EQ(sup::incomplete_utf8_tail("\xe2\x82"), 2u);
  EXPECT_EQ(sup::incomplete_utf8_tail("\xf0\x9f\x98"), 3u);
  EXPECT_EQ(sup::incomplete_utf8_tail("\xf0\x9f\x98\x80"), 0u);
  EXPECT_EQ(sup::incomplete_utf8_tail("\xff"), 0u);       // no character: nothing to wait for
  EXPECT_EQ(sup::incomplete_utf8_tail("\x80\x80\x80"), 0u);
}

TEST(IsoOfUs, MillisecondsInUtc) {
  EXPECT_EQ(sup::iso_of_us(1764572400123456), "2025-12-01T07:00:00.123Z");
}

}  // namespace
