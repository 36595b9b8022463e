// The root status.json as the box report: steps, load, memory, disks, and
// the background-measured sizes under the working directories.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sbxfs_fixture.hpp"

namespace sbxit {
namespace {

using BoxReportTest = SbxfsTest;

TEST_F(BoxReportTest, StepsListActionsOldestFirstMaskedAndCut) {
  std::string a = start(R"({"cmd": "echo output-never-shown; sleep 30 # $TOK hunter2x", "note": "web", )"
                        R"("secretEnv": {"TOK": "hunter2x"}})");
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(write_file(p("procs/" + a + "/signal"), "WINCH"), 0);
  ASSERT_EQ(run("echo > \"$MNT/procs/$ID/stop\"", 20, {{"ID", a}}).code, 0);
  ASSERT_EQ(mkdir_errno(p("procs/slot7")), 0);
  ASSERT_EQ(rmdir_errno(p("procs/slot7")), 0);
  std::string long_cmd = "true " + std::string(300, 'x');
  std::string b = start(long_cmd);
  ASSERT_FALSE(b.empty());

  auto s = root_status();
  ASSERT_TRUE(s["steps"].is_array()) << s.dump();
  const std::string dumped = s["steps"].dump();
  EXPECT_EQ(dumped.find("hunter2x"), std::string::npos) << dumped;
  EXPECT_EQ(dumped.find("output-never-shown\\n"), std::string::npos);
  std::vector<std::string> kinds;
  for (auto& st : s["steps"]) kinds.push_back(st["kind"]);
  EXPECT_EQ(kinds, (std::vector<std::string>{"start", "signal", "stop", "mkdir", "rmdir", "start"})) << dumped;
  auto& first = s["steps"][0];
  EXPECT_TRUE(is_iso_time(first["at"]));
  EXPECT_EQ(first["bgId"], a);
  EXPECT_EQ(first["note"], "web");
  EXPECT_TRUE(first["cwd"].is_string());
  EXPECT_NE(first["summary"].get<std::string>().find("****"), std::string::npos);
  EXPECT_EQ(s["steps"][1]["summary"].get<std::string>().rfind("SIGWINCH", 0), 0u) << s["steps"][1];
  EXPECT_EQ(s["steps"][3]["bgId"], "slot7");
  const std::string cut = s["steps"][5]["summary"];
  EXPECT_TRUE(cut.ends_with("\xE2\x80\xA6")) << cut;                 // "…"
  EXPECT_EQ(cut, long_cmd.substr(0, 199) + "\xE2\x80\xA6");         // 200 characters
}

TEST_F(BoxReportTest, KeepsTheLastThirtySteps) {
  for (int i = 0; i < 33; ++i) ASSERT_EQ(mkdir_errno(p("procs/s" + std::to_string(i))), 0);
  auto s = root_status();
  ASSERT_EQ(s["steps"].size(), 30u);
  EXPECT_EQ(s["steps"][0]["bgId"], "s3");
  EXPECT_EQ(s["steps"][29]["bgId"], "s32");
}

TEST_F(BoxReportTest, LoadMemoryAndDisksWithSameAs) {
  auto s = root_status();
  ASSERT_TRUE(s["load"].is_object()) << s.dump();
  for (const char* k : {"1m", "5m", "15m"}) EXPECT_TRUE(s["load"][k].is_number()) << s["load"];
  EXPECT_GT(s["memory"]["totalGb"].get<double>(), 0.0);
  EXPECT_GE(s["memory"]["availableGb"].get<double>(), 0.0);
  ASSERT_TRUE(s["disk"].is_array());
  std::vector<std::string> paths;
  for (auto& d : s["disk"]) paths.push_back(d["path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{state_, "/", "/tmp", "/dev/shm"}));
  // Each entry is counted once: sameAs names the earlier path on the same device.
  std::vector<std::pair<dev_t, std::string>> seen;
  for (auto& d : s["disk"]) {
    struct stat st {};
    ASSERT_EQ(::stat(d["path"].get<std::string>().c_str(), &st), 0);
    auto same = std::find_if(seen.begin(), seen.end(), [&](auto& e) { return e.first == st.st_dev; });
    if (same != seen.end()) {
      EXPECT_EQ(d["sameAs"], same->second) << d;
      EXPECT_FALSE(d.contains("sizeGb")) << d;
    } else {
      EXPECT_FALSE(d.contains("sameAs")) << d;
      for (const char* k : {"sizeGb", "usedGb", "freeGb"}) EXPECT_TRUE(d[k].is_number()) << d;
      EXPECT_GE(d["sizeGb"].get<double>(), d["freeGb"].get<double>());
      seen.emplace_back(st.st_dev, d["path"]);
    }
  }
  // The state directory lives under /tmp here: /tmp is the same device.
  struct stat st_state {}, st_tmp {};
  ASSERT_EQ(::stat(state_.c_str(), &st_state), 0);
  ASSERT_EQ(::stat("/tmp", &st_tmp), 0);
  if (st_state.st_dev == st_tmp.st_dev) {
    EXPECT_EQ(s["disk"][2]["sameAs"], state_);
  }
}

// The issue's bar: reading the root status.json with 500 running commands
// stays under 20 ms. Prints the figure (median and worst of 20 reads).
// Many running commands are all listed, oldest first. How fast the read is
// belongs to the benchmark (bench/run: status.json with 1000 running and
// 10 000 ended), not to a timed test.
TEST_F(BoxReportTest, ManyRunningCommandsAreAllListed) {
  extend_watchdog(120s);
  auto started = python(R"(
import os
m = os.environ['MNT']
ids = []
for i in range(100):
    fd = os.open(m + '/cmd', os.O_RDWR)
    os.write(fd, b'sleep 120\n')
    ids.append(os.read(fd, 100).decode().strip())
    os.close(fd)
print(' '.join(ids))
)",
                        120);
  ASSERT_EQ(started.code, 0) << started.err;
  std::vector<std::string> ids;
  for (std::size_t at = 0; at < started.out.size();) {
    const std::size_t end = started.out.find_first_of(" \n", at);
    if (end > at) ids.push_back(started.out.substr(at, end - at));
    at = end == std::string::npos ? started.out.size() : end + 1;
  }
  ASSERT_EQ(ids.size(), 100u) << started.out;
  json root = root_status();
  ASSERT_TRUE(root["procs"].is_array()) << root.dump();
  std::vector<std::string> listed;
  for (const auto& p : root["procs"]) listed.push_back(p["bgId"].get<std::string>());
  EXPECT_EQ(listed, ids);
}

TEST_F(BoxReportTest, WorkDirSizesMeasuringThenMeasured) {
  const std::string work = dir_ + "/work";
  ASSERT_EQ(run("mkdir -p \"$W/big/sub\" && head -c 2097152 /dev/urandom > \"$W/big/sub/blob\" && "
                "echo hi > \"$W/small\"",
                20, {{"W", work}})
                .code,
            0);
  std::string id = start(R"({"cmd": "sleep 30", "cwd": ")" + work + R"("})");
  ASSERT_FALSE(id.empty());
  auto first = root_status();
  ASSERT_TRUE(first["notMeasured"].is_array()) << first.dump();
  ASSERT_EQ(first["notMeasured"].size(), 1u) << first["notMeasured"];
  EXPECT_EQ(first["notMeasured"][0]["path"], work);
  EXPECT_EQ(first["notMeasured"][0]["measuring"], true);
  EXPECT_EQ(first["workDirSizes"], json::array());

  json measured;
  ASSERT_TRUE(wait_until(
      [&] {
        auto s = root_status();
        if (s["workDirSizes"].empty()) return false;
        measured = s;
        return true;
      },
      10s));
  EXPECT_EQ(measured["notMeasured"], json::array());
  auto& w = measured["workDirSizes"][0];
  EXPECT_EQ(w["path"], work);
  EXPECT_TRUE(is_iso_time(w["measuredAt"])) << w;
  EXPECT_GE(w["totalBytes"].get<long>(), 2097152);
  ASSERT_EQ(w["entries"].size(), 2u) << w;
  EXPECT_EQ(w["entries"][0]["name"], "big");
  EXPECT_GE(w["entries"][0]["bytes"].get<long>(), 2097152);
  EXPECT_EQ(w["entries"][1]["name"], "small");
  // Cached: the same measurement on the next read.
  EXPECT_EQ(root_status()["workDirSizes"][0]["measuredAt"], w["measuredAt"]);
}

// A file of several names counts once, as du counts it (it was counted
// for each name; audit).
TEST_F(BoxReportTest, WorkDirSizesCountAFileOfSeveralNamesOnce) {
  const std::string work = dir_ + "/work";
  ASSERT_EQ(run("mkdir -p \"$W/h\" && head -c 204800 /dev/urandom > \"$W/h/x\" && ln \"$W/h/x\" \"$W/h/y\" && "
                "ln \"$W/h/x\" \"$W/hl\"",
                20, {{"W", work}})
                .code,
            0);
  RunResult du = run("du -s -B1 \"$W\" | cut -f1", 20, {{"W", work}});
  ASSERT_EQ(du.code, 0) << du.err;
  ASSERT_FALSE(start(json{{"cmd", "sleep 30"}, {"cwd", work}}.dump()).empty());
  json w;
  ASSERT_TRUE(wait_until(
      [&] {
        const json s = root_status()["workDirSizes"];
        if (s.empty()) return false;
        w = s[0];
        return true;
      },
      10s));
  // du counts the folder itself too; the walk what is in it.
  struct stat top {};
  ASSERT_EQ(::stat(work.c_str(), &top), 0);
  EXPECT_EQ(w["totalBytes"].get<long long>() + static_cast<long long>(top.st_blocks) * 512, std::stoll(du.out)) << w;
  EXPECT_LT(w["totalBytes"].get<long long>(), 2 * 204800) << "counted once: " << w;
}

// A working directory in the mount itself, or reached through a link into
// it, is not walked: the walk's requests would go to this daemon, and one
// under way when it is killed (SIGKILL) would hold it and the mount for ever.
TEST_F(BoxReportTest, AWorkingDirectoryInTheMountItselfIsNotMeasured) {
  ASSERT_EQ(::symlink(mnt_.c_str(), (dir_ + "/link").c_str()), 0);
  const std::vector<std::string> dirs = {mnt_, mnt_ + "/procs", dir_ + "/link/procs", dir_};
  for (const std::string& d : dirs) ASSERT_FALSE(start(json{{"cmd", "sleep 30"}, {"cwd", d}}.dump()).empty()) << d;
  json sizes;
  ASSERT_TRUE(wait_until(
      [&] {
        sizes = root_status()["workDirSizes"];
        return sizes.size() == dirs.size();
      },
      10s))
      << sizes;
  for (const json& w : sizes) {
    if (w["path"] == dir_) {
      EXPECT_FALSE(w.contains("error")) << w;
      EXPECT_GE(w["entryCount"].get<int>(), 1) << w;
      continue;
    }
    EXPECT_EQ(w.value("error", ""), "in sbxfs's own mount: not measured") << w;
    EXPECT_FALSE(w.contains("entries")) << w;
  }
}

TEST_F(BoxReportTest, AFileSystemBelowAWorkingDirectoryThatAnswersNothingHoldsNothing) {
  const std::string work = dir_ + "/work", hung = work + "/hung";
  ASSERT_EQ(run("mkdir -p \"$H\" && echo hi > \"$W/small\"", 20, {{"H", hung}, {"W", work}}).code, 0);
  // Another sbxfs mounted below the working directory, stopped: it answers
  // no request until it is continued.
  auto r = run_argv({SBXFS_PATH, "--state-dir", dir_ + "/state-hung", hung}, 10);
  ASSERT_EQ(r.code, 0) << r.err;
  const pid_t other = static_cast<pid_t>(std::stol(read_file(dir_ + "/state-hung/lock").data));
  ASSERT_GT(other, 0);
  // Continued and unmounted however the test ends.
  const std::unique_ptr<void, std::function<void(void*)>> resume(this, [&](void*) {
    ::kill(other, SIGCONT);
    run_argv({"fusermount3", "-u", hung}, 10);
  });
  ASSERT_EQ(stat_errno(hung + "/status.json"), 0) << "the other one serves";
  ASSERT_EQ(::kill(other, SIGSTOP), 0);

  const std::string id = start(R"({"cmd": "sleep 30", "cwd": ")" + work + R"("})");
  ASSERT_FALSE(id.empty());
  json w;
  ASSERT_TRUE(wait_until(
      [&] {
        const json s = root_status();
        if (s["workDirSizes"].empty()) return false;
        w = s["workDirSizes"][0];
        return true;
      },
      10s))
      << "the walk waits for the stopped file system";
  EXPECT_EQ(w["path"], work);
  ASSERT_EQ(w["entries"].size(), 1u) << "the other file system is not counted: " << w;
  EXPECT_EQ(w["entries"][0]["name"], "small");
  EXPECT_EQ(kill_daemon(SIGTERM), 0) << "the daemon exits at once";
}

}  // namespace
}  // namespace sbxit
