// The parser of names with parameters (`FILE,KEY=VALUE,KEY`) and its table.
#include <gtest/gtest.h>

#include "fsd/file_params.hpp"

namespace {

using fsd::FileParams;
using fsd::ParamDir;
using fsd::ParamLimits;

const ParamLimits kLimits{600, 1 << 20};

sup::Result<FileParams> parse(ParamDir dir, std::string_view name, const ParamLimits& limits = kLimits) {
  const auto split = fsd::split_param_name(name);
  if (!split) return sup::Error{sup::Errc::not_found, "no comma"};
  return fsd::parse_file_params(split->first, fsd::find_param_file(dir, split->first), split->second, limits);
}

std::string error_of(ParamDir dir, std::string_view name, const ParamLimits& limits = kLimits) {
  auto r = parse(dir, name, limits);
  if (r) return "(no error)";
  EXPECT_EQ(r.error().code, sup::Errc::invalid_argument) << name;
  return r.error().message;
}

TEST(FileParams, SplitsAtTheFirstComma) {
  EXPECT_FALSE(fsd::split_param_name("wait"));
  auto s = fsd::split_param_name("wait,timeoutSec=5,tailBytes=1");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->first, "wait");
  EXPECT_EQ(s->second, "timeoutSec=5,tailBytes=1");
}

TEST(FileParams, TheTableNamesEachFileOnce) {
  for (const fsd::ParamFile& f : fsd::param_files()) {
    EXPECT_EQ(fsd::find_param_file(f.dir, f.name), &f) << f.name;
    EXPECT_FALSE(f.keys.empty()) << f.name;
  }
  EXPECT_TRUE(fsd::find_param_file(ParamDir::root, "status.json"));
  EXPECT_TRUE(fsd::find_param_file(ParamDir::record, "status.json"));
  EXPECT_FALSE(fsd::find_param_file(ParamDir::root, "wait"));
  EXPECT_FALSE(fsd::find_param_file(ParamDir::record, "stop"));
}

TEST(FileParams, NumbersAndFlags) {
  auto w = parse(ParamDir::record, "wait,timeoutSec=5,tailBytes=100");
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(w->number("timeoutSec"), 5);
  EXPECT_EQ(w->number("tailBytes"), 100);
  EXPECT_FALSE(w->number("readyPort"));
  EXPECT_FALSE(w->has("all"));

  auto a = parse(ParamDir::root, "status.json,all");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(a->has("all"));
  EXPECT_FALSE(a->number("all"));
  EXPECT_EQ(a->canonical(), "all");

  auto r = parse(ParamDir::record, "ready,readyPort=8080,timeoutSec=1,tailBytes=16384");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->number("readyPort"), 8080);
  EXPECT_EQ(r->number("tailBytes"), 16384);

  auto o = parse(ParamDir::record, "output,maxBytes=0,timeoutSec=600");
  ASSERT_TRUE(o) << o.error().message;
  EXPECT_EQ(o->number("maxBytes"), 0);
}

TEST(FileParams, TheCanonicalFormIgnoresOrderAndLeadingZeros) {
  auto a = parse(ParamDir::record, "wait,timeoutSec=5,tailBytes=010");
  auto b = parse(ParamDir::record, "wait,tailBytes=10,timeoutSec=5");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->canonical(), "tailBytes=10,timeoutSec=5");
  EXPECT_EQ(a->canonical(), b->canonical());
  EXPECT_NE(a->canonical(), parse(ParamDir::record, "wait,tailBytes=11,timeoutSec=5")->canonical());
}

TEST(FileParams, UnknownKeysAreNamed) {
  const std::string m = error_of(ParamDir::record, "wait,timeout=5");
  EXPECT_NE(m.find("unknown key 'timeout'"), std::string::npos) << m;
  EXPECT_NE(m.find("timeoutSec=N"), std::string::npos) << m;  // says what it takes
  EXPECT_NE(error_of(ParamDir::record, "wait,TIMEOUTSEC=5").find("unknown key"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "tail,all").find("unknown key 'all'"), std::string::npos);
  // A key of another file is unknown here.
  EXPECT_NE(error_of(ParamDir::record, "wait,readyPort=80").find("unknown key 'readyPort'"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::root, "status.json,timeoutSec=5").find("unknown key"), std::string::npos);
}

TEST(FileParams, AFileWithoutKeysTakesNone) {
  const std::string m = error_of(ParamDir::record, "signal,follow");
  EXPECT_NE(m.find("'signal' takes no parameters"), std::string::npos) << m;
}

TEST(FileParams, BadValues) {
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec=abc").find("timeoutSec=abc is not a whole number"),
            std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec=-1").find("not a whole number"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec=+1").find("not a whole number"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec=1.5").find("not a whole number"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec= 1").find("not a whole number"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec").find("timeoutSec needs a value"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec=").find("empty value"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::root, "status.json,all=1").find("all is a flag"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,").find("an empty key"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,,timeoutSec=1").find("an empty key"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,=5").find("an empty key"), std::string::npos);
}

TEST(FileParams, Ranges) {
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec=0").find("timeoutSec=0 is out of range: 1..600"),
            std::string::npos);
  const std::string above = error_of(ParamDir::record, "wait,timeoutSec=601");
  EXPECT_NE(above.find("1..600 (the mount's wait_timeout)"), std::string::npos) << above;
  EXPECT_TRUE(parse(ParamDir::record, "wait,timeoutSec=601", ParamLimits{3600, 0}));
  EXPECT_NE(error_of(ParamDir::record, "tail,tailBytes=0").find("out of range: 1..16384"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "tail,tailBytes=16385").find("out of range"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "ready,readyPort=65536").find("out of range: 1..65535"), std::string::npos);
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec=99999999999999999999999").find("out of range"),
            std::string::npos);
  // maxBytes is bounded by log_max, or by nothing when log_max is 0.
  EXPECT_NE(error_of(ParamDir::record, "output,maxBytes=1048577").find("(the mount's log_max)"), std::string::npos);
  EXPECT_TRUE(parse(ParamDir::record, "output,maxBytes=1048576"));
  EXPECT_TRUE(parse(ParamDir::record, "output,maxBytes=1099511627776", ParamLimits{600, 0}));
}

TEST(FileParams, AKeyGivenTwice) {
  EXPECT_NE(error_of(ParamDir::record, "wait,timeoutSec=1,timeoutSec=1").find("timeoutSec is given twice"),
            std::string::npos);
  EXPECT_NE(error_of(ParamDir::root, "status.json,all,all").find("all is given twice"), std::string::npos);
}

// Text and '+'-list keys are for files of later rounds (a cursor, fields=a+b):
// a row of their own makes one here to check how they parse.
TEST(FileParams, TextAndListKeys) {
  constexpr fsd::ParamKey keys[] = {{"since", fsd::ParamType::text}, {"fields", fsd::ParamType::list},
                                    {"follow", fsd::ParamType::flag}};
  const fsd::ParamFile row{ParamDir::record, "events", keys};
  auto r = fsd::parse_file_params("events", &row, "since=c:1-2=x,fields=steps+disk,follow", kLimits);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text("since"), "c:1-2=x");  // a value may hold '='
  EXPECT_EQ(r->items("fields"), (std::vector<std::string>{"steps", "disk"}));
  EXPECT_TRUE(r->has("follow"));
  EXPECT_EQ(r->canonical(), "fields=steps+disk,follow,since=c:1-2=x");
  auto bad = fsd::parse_file_params("events", &row, "fields=steps++disk", kLimits);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("empty item"), std::string::npos);
}

}  // namespace
