#include "api/model_lineage.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

using Json = nlohmann::json;

Json Isvc(const std::string& name, const std::string& mv, const std::string& phase = "Running") {
  return {{"metadata", {{"name", name}}},
          {"spec", {{"modelVersion", mv}}},
          {"status", {{"phase", phase}}}};
}

TEST(ModelLineageTest, ServingSkipsOtherVersionsTerminalAndDeletingServices) {
  Json deleting = Isvc("old", "v3");
  deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z";
  const std::vector<Json> svcs = {Isvc("search", "v3"),
                                  Isvc("chat", "v3", "Pending"),
                                  Isvc("done", "v3", "Succeeded"),
                                  Isvc("bad", "v3", "Failed"),
                                  Isvc("other", "v2"),
                                  deleting,
                                  Json(),
                                  Isvc("search", "v3")};
  std::vector<const Json*> ptrs;
  for (const Json& s : svcs) ptrs.push_back(&s);
  ptrs.push_back(nullptr);
  EXPECT_EQ(ServingInferenceServices("v3", ptrs), (std::vector<std::string>{"chat", "search"}));
  EXPECT_TRUE(ServingInferenceServices("v9", ptrs).empty());
}

TEST(ModelLineageTest, DeletionMessageNamesTheServices) {
  EXPECT_EQ(ServedDeletionMessage("llama-v3", {"search", "chat"}),
            "modelversion \"llama-v3\" is served by inferenceservices chat, search: delete or "
            "repoint them first");
  EXPECT_EQ(ServedDeletionMessage("llama-v3", {"chat"}),
            "modelversion \"llama-v3\" is served by inferenceservice chat: delete or repoint it "
            "first");
}

TEST(ModelLineageTest, StatusFollowsTheCheckpoint) {
  const Json mv = Json::parse(R"({"metadata": {"name": "v3"},
                                  "spec": {"model": "llama", "version": "3", "checkpoint": "ck"}})");
  const Json ck = Json::parse(R"({"metadata": {"name": "ck"},
                                  "spec": {"jobName": "train", "step": 400, "path": "/c/400"},
                                  "status": {"phase": "Ready"}})");
  Json st = ModelVersionStatus(mv, &ck, {"search", "chat"});
  EXPECT_EQ(st["servedBy"], Json::array({"chat", "search"}));
  EXPECT_EQ(st["checkpoint"], Json::parse(R"({"name": "ck", "jobName": "train", "step": 400,
                                              "path": "/c/400"})"));
  EXPECT_EQ(st["phase"], "Ready");
  EXPECT_EQ(st["reason"], "");
  EXPECT_EQ(st["conditions"][0]["type"], "CheckpointResolved");
  EXPECT_EQ(st["conditions"][0]["status"], "True");
  EXPECT_EQ(st["message"], "from checkpoint \"ck\" of trainingjob \"train\" at step 400");
  // The same inputs give an equal object (no times): a writer compares before writing.
  EXPECT_EQ(ModelVersionStatus(mv, &ck, {"chat", "search"}), st);

  st = ModelVersionStatus(mv, nullptr, {});
  EXPECT_EQ(st["servedBy"], Json::array());
  EXPECT_FALSE(st.contains("checkpoint"));
  EXPECT_EQ(st["phase"], "Pending");
  EXPECT_EQ(st["reason"], "CheckpointMissing");
  EXPECT_EQ(st["message"], "spec.checkpoint: checkpoint \"ck\" not found");
  EXPECT_EQ(st["conditions"][0]["status"], "False");

  Json writing = ck;
  writing["status"]["phase"] = "Writing";
  st = ModelVersionStatus(mv, &writing, {});
  EXPECT_EQ(st["phase"], "Pending");
  EXPECT_EQ(st["reason"], "CheckpointNotReady");
  EXPECT_EQ(st["checkpoint"]["step"], 400);

  Json other = ck;
  other["metadata"]["name"] = "another";
  EXPECT_EQ(ModelVersionStatus(mv, &other, {})["reason"], "CheckpointMissing");

  Json no_ckpt = mv;
  no_ckpt["spec"].erase("checkpoint");
  st = ModelVersionStatus(no_ckpt, nullptr, {"chat"});
  EXPECT_EQ(st["phase"], "Ready");
  EXPECT_EQ(st["conditions"][0]["reason"], "NoCheckpoint");

  Json retired = mv;
  retired["status"] = {{"phase", "Retired"}};
  EXPECT_EQ(ModelVersionStatus(retired, nullptr, {})["phase"], "Retired");
}

}  // namespace
}  // namespace tessera::api
