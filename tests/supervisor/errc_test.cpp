// Errc's one table: each code's errno and names agree, and failed system
// calls turn into the codes the records and FUSE replies expect.
#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "supervisor/error.hpp"

namespace {

using sup::Errc;

constexpr Errc kAll[] = {Errc::invalid_argument, Errc::not_found,     Errc::not_a_directory, Errc::permission_denied,
                         Errc::not_a_program,    Errc::already_exists, Errc::busy,            Errc::too_big,
                         Errc::name_too_long,    Errc::try_again,      Errc::too_many_files,  Errc::no_such_process,
                         Errc::io_error,         Errc::no_space,       Errc::interrupted,     Errc::timed_out,
                         Errc::broken_pipe, Errc::no_data};

TEST(ErrcTable, NameIsTheNameOfItsErrno) {
  for (Errc c : kAll) {
    ASSERT_NE(::strerrorname_np(sup::errno_of(c)), nullptr) << sup::errc_id(c);
    EXPECT_STREQ(sup::error_code_name(c), ::strerrorname_np(sup::errno_of(c))) << sup::errc_id(c);
  }
}

TEST(ErrcTable, EachCodeHasItsOwnId) {
  std::set<std::string> ids;
  for (Errc c : kAll) EXPECT_TRUE(ids.insert(sup::errc_id(c)).second) << sup::errc_id(c);
  EXPECT_STREQ(sup::errc_id(Errc::timed_out), "timed_out");
}

TEST(ErrcTable, ItsErrnoTurnsBackIntoIt) {
  for (Errc c : kAll) {
    if (c == Errc::not_a_program) continue;  // EACCES is permission_denied
    EXPECT_EQ(sup::errc_from_errno(sup::errno_of(c)), c) << sup::errc_id(c);
  }
}

TEST(ErrcTable, OtherErrnosOfFailedCalls) {
  const std::pair<int, Errc> cases[] = {
      {ENOEXEC, Errc::not_a_program}, {EPERM, Errc::permission_denied}, {EISDIR, Errc::permission_denied},
      {ENOTEMPTY, Errc::already_exists}, {ENOMEM, Errc::try_again},     {ENFILE, Errc::too_many_files},
      {EDQUOT, Errc::no_space},          {EXDEV, Errc::io_error},       {0, Errc::io_error},
  };
  for (auto [err, code] : cases) EXPECT_EQ(sup::errc_from_errno(err), code) << err;
  EXPECT_EQ(sup::errno_of(Errc::not_a_program), EACCES);
}

TEST(ErrcTable, ErrorFromErrnoSaysWhatAndWhy) {
  const sup::Error e = sup::error_from_errno(ENOENT, "open /x");
  EXPECT_EQ(e.code, Errc::not_found);
  EXPECT_EQ(e.message, std::string("open /x: ") + std::strerror(ENOENT));
}

}  // namespace
