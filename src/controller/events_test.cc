// EventPut: the Event's key and stored text, written out by hand for speed, must be exactly the
// stored form (ToStored's dump: sorted keys) of the Event document it describes.
#include "controller/events.h"

#include <gtest/gtest.h>

#include "api/object_codec.h"

namespace tessera::controller {
namespace {

TEST(EventPutTest, WritesTheStoredFormOfTheEventDocument) {
  const Json job = {
      {"apiVersion", "tessera.dev/v1"},
      {"kind", "TrainingJob"},
      {"metadata", {{"name", "llama-70b-pretrain-"}, {"namespace", "team-a"}, {"uid", "u-1"}}}};
  const absl::Time now = absl::FromUnixSeconds(1767225600);
  const store::Op op =
      EventPut(job, "1f-2", {"Scheduled", "bound \"8\" members\nto n1 \xc3\xa9 \x01", true}, now);
  EXPECT_EQ(op.key, "/registry/events/team-a/llama-70b-pretrain-1f-2");
  const Json want = {
      {"apiVersion", "tessera.dev/v1"},
      {"kind", "Event"},
      {"metadata",
       {{"name", "llama-70b-pretrain-1f-2"},
        {"namespace", "team-a"},
        {"creationTimestamp", "2026-01-01T00:00:00Z"},
        {"labels", {{"involved-kind", "trainingjob"}, {"involved-name", "llama-70b-pretrain-"}}}}},
      {"spec",
       {{"involvedObject",
         {{"kind", "TrainingJob"},
          {"name", "llama-70b-pretrain-"},
          {"namespace", "team-a"},
          {"uid", "u-1"}}},
        {"reason", "Scheduled"},
        {"message", "bound \"8\" members\nto n1 \xc3\xa9 \x01"},
        {"type", "Warning"},
        {"eventTime", "2026-01-01T00:00:00Z"}}},
      {"status", {{"phase", "Recorded"}}}};
  EXPECT_EQ(op.value, api::ToStored(want));
  // What the API serves from it.
  absl::StatusOr<Json> served = api::FromStored(op.value, 7);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ((*served)["metadata"]["resourceVersion"], "7");
}

TEST(EventPutTest, AnObjectWithoutNamespaceOrUidGetsTheDefaultNamespaceOnly) {
  const Json node = {{"kind", "Node"}, {"metadata", {{"name", "n1"}}}};
  const store::Op op = EventPut(node, "a", {"Cordoned", "", false}, absl::UnixEpoch());
  EXPECT_EQ(op.key, "/registry/events/default/n1-a");
  const Json ev = Json::parse(op.value);
  EXPECT_EQ(ev["spec"]["involvedObject"], Json({{"kind", "Node"}, {"name", "n1"}}));
  EXPECT_EQ(ev["spec"]["type"], "Normal");
  EXPECT_EQ(ev["metadata"]["labels"]["involved-kind"], "node");
  EXPECT_EQ(op.value, Json::parse(op.value).dump());
}

TEST(EventPutTest, LongMessagesAreCut) {
  const Json job = {{"kind", "TrainingJob"}, {"metadata", {{"name", "j"}}}};
  const store::Op op =
      EventPut(job, "a", {"Failed", std::string(10000, 'm'), true}, absl::UnixEpoch());
  EXPECT_EQ(Json::parse(op.value)["spec"]["message"].get<std::string>().size(), 4096u);
}

}  // namespace
}  // namespace tessera::controller
