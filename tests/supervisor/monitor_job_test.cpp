// The monitor job's encoding, as the launcher writes it and the fork server
// reads it.
#include <gtest/gtest.h>

#include "supervisor/monitor_job.hpp"

namespace {

TEST(MonitorJob, EncodedAndParsedBack) {
  const std::vector<std::string> args = {"--dir", "/s/staging/new-1~1", "--", "/bin/echo", ""};
  const std::map<std::string, std::string> env = {{"A", "1"}, {"PATH", "/bin"}, {"EMPTY", ""}};
  std::string job = sup::encode_job(args, env, "/work");
  sup::JobParts parts;
  ASSERT_TRUE(sup::parse_job(job, &parts));
  ASSERT_EQ(parts.args.size(), args.size());
  for (size_t i = 0; i < args.size(); ++i) EXPECT_EQ(parts.args[i], args[i]);
  ASSERT_EQ(parts.env.size(), 3u);
  EXPECT_STREQ(parts.env[0], "A=1");
  EXPECT_STREQ(parts.env[1], "EMPTY=");
  EXPECT_STREQ(parts.env[2], "PATH=/bin");
  EXPECT_STREQ(parts.cwd, "/work");
}

TEST(MonitorJob, MalformedJobsAreRefused) {
  const std::string good = sup::encode_job({"--dir", "/d", "--", "x"}, {{"K", "V"}}, "/");
  for (std::string bad : {std::string(), good.substr(0, good.size() - 1), good + "extra" + '\0',
                          std::string("9\0", 2) + good.substr(2), std::string("x\0", 2) + good.substr(2),
                          std::string("\0", 1) + good.substr(2)}) {
    sup::JobParts parts;
    EXPECT_FALSE(sup::parse_job(bad, &parts));
  }
}

}  // namespace
