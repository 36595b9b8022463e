// Errors stay sup::Error until the reply: the errno a refusal is answered
// with, the name `errors` shows and the name records show agree.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "fsd/errno_map.hpp"
#include "fsd/handle.hpp"

namespace {

constexpr sup::Errc kEvery[] = {
    sup::Errc::invalid_argument, sup::Errc::not_found,      sup::Errc::not_a_directory, sup::Errc::permission_denied,
    sup::Errc::not_a_program,    sup::Errc::already_exists, sup::Errc::busy,            sup::Errc::too_big,
    sup::Errc::name_too_long,    sup::Errc::try_again,      sup::Errc::too_many_files,  sup::Errc::no_such_process,
    sup::Errc::io_error,         sup::Errc::no_space,       sup::Errc::interrupted,     sup::Errc::timed_out,
    sup::Errc::broken_pipe,
    sup::Errc::no_data,
};

TEST(ErrnoMap, NamesAgreeWithTheSupervisors) {
  for (sup::Errc c : kEvery) {
    EXPECT_STREQ(fsd::errno_name(c), sup::error_code_name(c)) << static_cast<int>(c);
    EXPECT_STREQ(fsd::errno_name(c), fsd::errno_name(fsd::to_errno(c)));
  }
  EXPECT_EQ(fsd::to_errno(sup::Errc::not_a_program), EACCES);
  EXPECT_EQ(fsd::to_errno(sup::Errc::too_big), E2BIG);
  EXPECT_STREQ(fsd::errno_name(EDQUOT), "EDQUOT");
}

TEST(ErrnoMap, ARefusalKeepsItsCodeUntilSent) {
  for (sup::Errc c : kEvery) {
    const fsd::Reply r = fsd::Reply::fail(sup::Error{c, "why"});
    EXPECT_EQ(r.type(), fsd::Reply::Type::error);
    EXPECT_EQ(r.err(), fsd::to_errno(c));
  }
  EXPECT_EQ(fsd::Reply::error(EPERM).err(), EPERM);
  EXPECT_EQ(fsd::Reply::error(0).err(), 0);
}

}  // namespace
