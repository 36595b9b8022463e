// Replays the shell session of README.md against a throwaway mount.
//
// The session is the first fenced block whose opening line is exactly
// "```sh session". Its body is a shell script: every `/work/.sbx` in it is
// replaced by the test's mount point, and it runs as `sh -e` in an empty
// directory, so every command in it must succeed (a `grep` of the expected
// text is an assertion). The replay passes when the script exits 0 within
// 60 s.
#include <fstream>
#include <sstream>
#include <string>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using ReadmeSessionTest = SbxfsTest;

/// The body of the first "```sh session" block, or nullopt.
std::optional<std::string> session_block(const std::string& markdown) {
  std::istringstream in(markdown);
  std::string line, body;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string trimmed = line;
    while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\t')) trimmed.pop_back();
    if (!inside) {
      if (trimmed == "```sh session") inside = true;
      continue;
    }
    if (trimmed == "```") return body;
    body += line + "\n";
  }
  return std::nullopt;
}

TEST_F(ReadmeSessionTest, ReplayTheReadmeSession) {
  const std::string readme_path = std::string(SBX_SOURCE_DIR) + "/README.md";
  auto readme = read_file(readme_path);
  if (readme.err) GTEST_SKIP() << readme_path << " is missing";
  auto block = session_block(readme.data);
  if (!block)
    GTEST_SKIP() << readme_path << " has no fenced block opened by the line \"```sh session\" "
                 << "(a shell script run with sh -e, /work/.sbx replaced by the mount point)";
  std::string script = *block;
  for (size_t pos = 0; (pos = script.find("/work/.sbx", pos)) != std::string::npos; pos += mnt_.size())
    script.replace(pos, 10, mnt_);
  ASSERT_EQ(mkdir_errno(dir_ + "/session"), 0);
  ASSERT_EQ(write_file(dir_ + "/session.sh", script, O_WRONLY | O_CREAT | O_TRUNC), 0);
  extend_watchdog(30s);
  auto r = run(R"(cd "$T/session" && exec sh -e "$T/session.sh" 2>&1)", 60);
  EXPECT_EQ(r.code, 0) << "the README session failed; its output:\n" << r.out << r.err;
}

}  // namespace
}  // namespace sbxit
