#include "obs/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::obs {
namespace {

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string TempPath(const char* tag) {
  return std::string(testing::TempDir()) + "/" + tag + "_" + std::to_string(getpid()) + ".log";
}

TEST(LogTest, JsonLinesCarryTsLevelMsgComponentAndFields) {
  const std::string path = TempPath("json");
  absl::StatusOr<Logger> base = Logger::File(path, LogFormat::kJson, "server");
  ASSERT_TRUE(base.ok()) << base.status();
  Logger ctl = base->WithComponent("controller");
  base->Info("listening", {{"port", 7420}});
  // Quotes, backslashes, newlines and control bytes must not break the line.
  ctl.Warn("job \"x\" preempted\nby \\ y\x01", {{"job", "train"},
                                                {"namespace", "ml"},
                                                {"gpus", 8.5},
                                                {"ok", false},
                                                {"msg", "must not shadow"}});
  ctl.Error("node lost", {{"node", "n1"}});
  std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 3u);
  std::vector<nlohmann::json> js;
  for (const std::string& l : lines) {
    nlohmann::json j = nlohmann::json::parse(l, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(j.is_discarded()) << l;
    ASSERT_TRUE(j.is_object());
    for (const char* k : {"ts", "level", "msg", "component"}) {
      ASSERT_TRUE(j.contains(k) && j[k].is_string()) << k << " in " << l;
    }
    // RFC 3339 UTC with microseconds: 2026-11-30T17:10:40.123456Z
    EXPECT_THAT(j["ts"].get<std::string>(),
                ::testing::MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\\.[0-9]{6}Z"));
    js.push_back(j);
  }
  EXPECT_EQ(js[0]["level"], "info");
  EXPECT_EQ(js[0]["component"], "server");
  EXPECT_EQ(js[0]["port"], 7420);
  EXPECT_EQ(js[1]["level"], "warning");
  EXPECT_EQ(js[1]["component"], "controller");
  EXPECT_EQ(js[1]["msg"], "job \"x\" preempted\nby \\ y\x01");
  EXPECT_EQ(js[1]["job"], "train");
  EXPECT_EQ(js[1]["namespace"], "ml");
  EXPECT_EQ(js[1]["gpus"], 8.5);
  EXPECT_EQ(js[1]["ok"], false);
  EXPECT_EQ(js[2]["level"], "error");
  EXPECT_EQ(js[2]["node"], "n1");
  unlink(path.c_str());
}

TEST(LogTest, TextLinesAreReadable) {
  const std::string path = TempPath("text");
  absl::StatusOr<Logger> log = Logger::File(path, LogFormat::kText, "agent");
  ASSERT_TRUE(log.ok());
  log->Info("member started", {{"job", "train"}, {"reason", "two words"}});
  std::vector<std::string> lines = Lines(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0],
              ::testing::MatchesRegex(
                  "[0-9T:.-]+Z info agent: member started job=train reason=\"two words\""));
  unlink(path.c_str());
}

TEST(LogTest, ParseLogFormatNamesTheFlag) {
  EXPECT_EQ(*ParseLogFormat("json"), LogFormat::kJson);
  EXPECT_EQ(*ParseLogFormat("text"), LogFormat::kText);
  absl::StatusOr<LogFormat> bad = ParseLogFormat("xml");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("--log-format"));
}

TEST(LogTest, NonFiniteNumbersStayValidJson) {
  std::string body = FormatLogBody(LogFormat::kJson, "c", "m", {{"x", 1.0 / 0.0}});
  nlohmann::json j = nlohmann::json::parse("{" + body + "}");
  EXPECT_EQ(j["x"], "+Inf");
}

}  // namespace
}  // namespace tessera::obs
