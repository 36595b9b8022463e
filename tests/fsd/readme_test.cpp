// The README the tree shows: its example names open on the mount it describes.
#include <gtest/gtest.h>

#include <regex>

#include "fsd/file_params.hpp"
#include "fsd/files.hpp"

namespace {

/// Every `FILE,KEYS` name of `text` whose values are all given (not N or
/// TEXT), with the folder it is in.
std::vector<std::pair<fsd::ParamDir, std::string>> concrete_names(const std::string& text) {
  std::vector<std::pair<fsd::ParamDir, std::string>> out;
  const std::regex name(R"((procs/ID/)?([a-z.]+(,[A-Za-z]+(=[^\s,"')]+)?)+))");
  for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
    const std::string n = (*it)[2];
    if (std::regex_search(n, std::regex(R"(=(N|TEXT|CURSOR|RE|A\+B)\b)"))) continue;
    out.emplace_back((*it)[1].matched ? fsd::ParamDir::record : fsd::ParamDir::root, n);
  }
  return out;
}

TEST(Readme, ItsExampleNamesAreWithinTheMountsLimits) {
  for (const int cap : {5, 60, 600}) {
    fsd::Config cfg;
    cfg.mountpoint = "/mnt/sbx";
    cfg.wait_timeout = std::chrono::seconds(cap);
    const std::string readme = fsd::make_readme(cfg);
    const auto names = concrete_names(readme);
    std::size_t waits = 0;
    for (const auto& [dir, name] : names) {
      const auto split = fsd::split_param_name(name);
      const fsd::ParamFile* row = fsd::find_param_file(dir, split->first);
      if (!row) continue;  // a word with a comma, no file
      waits += split->first == "wait";
      const auto params = fsd::parse_file_params(split->first, row, split->second, cfg.param_limits());
      EXPECT_TRUE(params) << "wait_timeout " << cap << ": " << name << ": " << params.error().message;
    }
    EXPECT_GE(waits, 1u) << "the wait example is found";
  }
}

}  // namespace
