#include "api/member_status.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "api/kinds.h"
#include "api/object_codec.h"

namespace tessera::api {
namespace {

TEST(MemberStatusTest, RoundTripsThroughJson) {
  MemberStatus m;
  m.member = "worker-3";
  m.generation = 4;
  m.state = MemberState::kFailed;
  m.exit_code = 3;
  m.reason = ExitReason(3);
  m.message = "Traceback\nValueError: bad";
  m.node = "n1";
  m.last_checkpoint = MemberCheckpoint{120, "/ckpt/120", absl::FromUnixSeconds(1700000000)};
  m.time = absl::FromUnixSeconds(1700000100);
  absl::StatusOr<MemberStatus> back = MemberStatusFromJson(ToJson(m));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, m);
  EXPECT_EQ(ToJson(m)["state"], "Failed");
  EXPECT_EQ(ToJson(m)["exitCode"], 3);
}

TEST(MemberStatusTest, RefusesMalformedEntriesNamingTheField) {
  EXPECT_TRUE(absl::StrContains(
      MemberStatusFromJson({{"generation", 1}, {"state", "Running"}}).status().message(),
      "member"));
  EXPECT_TRUE(absl::StrContains(
      MemberStatusFromJson({{"member", "w-0"}, {"generation", -1}, {"state", "Running"}})
          .status()
          .message(),
      "generation"));
  EXPECT_TRUE(absl::StrContains(
      MemberStatusFromJson({{"member", "w-0"}, {"generation", 1}, {"state", "Done"}})
          .status()
          .message(),
      "state"));
  // MembersOf skips what does not decode.
  nlohmann::json status = {{"members",
                            {{{"member", "w-0"}, {"generation", 1}, {"state", "Running"}},
                             {{"member", "w-1"}, {"state", "Running"}}}}};
  ASSERT_EQ(MembersOf(status).size(), 1u);
  EXPECT_EQ(MembersOf(status)[0].member, "w-0");
  EXPECT_NE(FindMember(MembersOf(status), "w-0"), nullptr);
  EXPECT_EQ(FindMember(MembersOf(status), "w-1"), nullptr);
}

TEST(MemberStatusTest, ExitReasonNamesCodesAndSignals) {
  EXPECT_EQ(ExitReason(0), "completed");
  EXPECT_EQ(ExitReason(3), "exited with code 3");
  EXPECT_EQ(ExitReason(137), "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(ExitReason(143), "killed by signal 15 (SIGTERM)");
  EXPECT_EQ(ExitReason(-1), "could not be started");
}

TEST(MemberStatusTest, TailLinesKeepsTheLastLinesWithinBytes) {
  EXPECT_EQ(TailLines("a\nb\nc\nd\n", 2, 100), "c\nd");
  EXPECT_EQ(TailLines("only", 5, 100), "only");
  EXPECT_EQ(TailLines("", 5, 100), "");
  // Cut to bytes at a line start.
  EXPECT_EQ(TailLines("first line\nsecond\n", 5, 8), "second");
  // Control characters and broken UTF-8 never reach the JSON string.
  EXPECT_EQ(TailLines(std::string("x\0y\x1b[31mz\xff", 10), 5, 100), "x?y?[31mz?");
  // A multi-byte character cut at the front is dropped, not half kept.
  const std::string s = "\xc3\xa9\xc3\xa9";  // "éé"
  EXPECT_EQ(TailLines(s, 5, 3), "\xc3\xa9");
  EXPECT_TRUE(IsValidUtf8(TailLines("\xe2\x82\xac\xe2\x82\xac", 5, 4)));
}

TEST(MemberStatusTest, SchemaAcceptsTheRecordAndRefusesOutOfRange) {
  const KindInfo* kind = KindByPlural("trainingjobs");
  ASSERT_NE(kind, nullptr);
  const Schema* status = kind->object_schema.FieldSchema("status");
  ASSERT_NE(status, nullptr);
  MemberStatus m;
  m.member = "w-0";
  m.generation = 2;
  m.state = MemberState::kExited;
  m.exit_code = 0;
  m.time = absl::FromUnixSeconds(1);
  std::vector<FieldError> errors;
  status->Validate({{"members", {ToJson(m)}}}, "status", errors);
  EXPECT_TRUE(errors.empty()) << errors[0].ToString();
  nlohmann::json bad = ToJson(m);
  bad["exitCode"] = 300;
  bad["state"] = "Finished";
  status->Validate({{"members", {bad}}}, "status", errors);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "status.members[0].state");
  EXPECT_EQ(errors[1].field, "status.members[0].exitCode");
}

}  // namespace
}  // namespace tessera::api
