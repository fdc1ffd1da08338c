#include "kube/store.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kube/api_error.h"

namespace tessera::kube {
namespace {

ObjectPtr PodOn(const std::string& ns, const std::string& name, const std::string& node) {
  return std::make_shared<const nlohmann::json>(nlohmann::json{
      {"metadata", {{"name", name}, {"namespace", ns}}}, {"spec", {{"nodeName", node}}}});
}

std::vector<std::string> Names(const std::vector<ObjectPtr>& objs) {
  std::vector<std::string> out;
  out.reserve(objs.size());
  for (const ObjectPtr& o : objs) out.push_back(KeyOf(*o));
  std::sort(out.begin(), out.end());
  return out;
}

IndexFunc ByNode() {
  return [](const nlohmann::json& o) -> std::vector<std::string> {
    std::string node = o["spec"].value("nodeName", "");
    if (node.empty()) return {};
    return {node};
  };
}

TEST(StoreTest, IndexesFollowUpdatesDeletesAndReplace) {
  Store s;
  ASSERT_TRUE(s.AddIndexer("node", ByNode()).ok());
  ASSERT_TRUE(s.AddIndexer("namespace", NamespaceIndex).ok());
  EXPECT_EQ(s.AddIndexer("node", ByNode()).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.Upsert(PodOn("a", "p1", "n1")), nullptr);
  s.Upsert(PodOn("a", "p2", "n1"));
  s.Upsert(PodOn("b", "p3", ""));
  std::vector<ObjectPtr> got;
  ASSERT_TRUE(s.ByIndex("node", "n1", &got).ok());
  EXPECT_EQ(Names(got), (std::vector<std::string>{"a/p1", "a/p2"}));
  ASSERT_TRUE(s.ByIndex("namespace", "b", &got).ok());
  EXPECT_EQ(Names(got), (std::vector<std::string>{"b/p3"}));

  ObjectPtr old = s.Upsert(PodOn("a", "p2", "n2"));  // moves to n2
  ASSERT_NE(old, nullptr);
  EXPECT_EQ((*old)["spec"]["nodeName"], "n1");
  ASSERT_TRUE(s.ByIndex("node", "n1", &got).ok());
  EXPECT_EQ(Names(got), (std::vector<std::string>{"a/p1"}));
  ASSERT_TRUE(s.ByIndex("node", "n2", &got).ok());
  EXPECT_EQ(Names(got), (std::vector<std::string>{"a/p2"}));

  EXPECT_NE(s.Remove("a/p1"), nullptr);
  EXPECT_EQ(s.Remove("a/p1"), nullptr);
  ASSERT_TRUE(s.ByIndex("node", "n1", &got).ok());
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(s.ByIndex("nope", "x", &got).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.AddIndexer("late", ByNode()).code(), absl::StatusCode::kFailedPrecondition);

  std::vector<ObjectPtr> before = s.Replace({PodOn("c", "p9", "n9")});
  EXPECT_EQ(Names(before), (std::vector<std::string>{"a/p2", "b/p3"}));
  EXPECT_EQ(s.size(), 1u);
  ASSERT_TRUE(s.ByIndex("node", "n2", &got).ok());
  EXPECT_TRUE(got.empty());
  ASSERT_TRUE(s.ByIndex("node", "n9", &got).ok());
  EXPECT_EQ(Names(got), (std::vector<std::string>{"c/p9"}));
  EXPECT_NE(s.Get("c/p9"), nullptr);
  EXPECT_EQ(s.ListKeys(), (std::vector<std::string>{"c/p9"}));
}

TEST(StoreTest, ClusterScopedKeysHaveNoNamespace) {
  EXPECT_EQ(KeyOf(nlohmann::json{{"metadata", {{"name", "n1"}}}}), "n1");
  EXPECT_EQ(KeyOf(nlohmann::json{{"metadata", {{"name", "p"}, {"namespace", "x"}}}}), "x/p");
}

TEST(ApiErrorTest, StatusBodiesBecomeTypedErrors) {
  const absl::Status conflict =
      ApiError("update leases kube-system/l", 409,
               R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict",
          "message":"Operation cannot be fulfilled on leases \"l\": the object has been modified",
          "code":409})");
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(IsApiConflict(conflict));
  EXPECT_FALSE(IsApiAlreadyExists(conflict));
  EXPECT_EQ(ApiReason(conflict), "Conflict");
  EXPECT_EQ(conflict.message(),
            "update leases kube-system/l: Conflict: Operation cannot be fulfilled on leases "
            "\"l\": the object has been modified");
  const absl::Status exists = ApiError(
      "create pods a/p", 409, R"({"kind":"Status","reason":"AlreadyExists","message":"x"})");
  EXPECT_EQ(exists.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(IsApiAlreadyExists(exists));
  EXPECT_TRUE(
      IsApiNotFound(ApiError("get pods a/p", 404, R"({"kind":"Status","reason":"NotFound"})")));
  EXPECT_TRUE(IsApiGone(ApiErrorFromStatus(
      "watch pods", {{"kind", "Status"}, {"reason", "Expired"}, {"code", 410}})));
  const absl::Status proxy = ApiError("get nodes", 502, "<html>bad gateway</html>");
  EXPECT_EQ(proxy.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(proxy.message(), "get nodes: HTTP 502: \"<html>bad gateway</html>\"");
  EXPECT_TRUE(IsApiTooManyRequests(ApiError("evict pods a/p", 429, "{}")));
  EXPECT_EQ(ApiHttpCode(absl::InternalError("x")), 0);
  EXPECT_FALSE(IsApiNotFound(absl::NotFoundError("not from the API")));
}

}  // namespace
}  // namespace tessera::kube
