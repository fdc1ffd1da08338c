#include <gtest/gtest.h>

#include "kube/gang_objects.h"

namespace tessera::kube {
namespace {

TEST(GangCodecTest, Kep4671PodGroupRoundTripsAndKeepsUnmodelledFields) {
  const Json j = Json::parse(R"({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup",
    "metadata": {"name": "train", "namespace": "ml", "resourceVersion": "9"},
    "spec": {"workloadRef": {"workloadName": "job", "templateName": "workers"},
             "schedulingPolicy": {"gang": {"minCount": 8}},
             "schedulingConstraints": {"topology": [{"key": "tessera.dev/rack"}]},
             "disruptionMode": {"all": {}},
             "priorityClassName": "high", "priority": 1000},
    "status": {"conditions": [{"type": "PodGroupScheduled", "status": "False",
      "reason": "Unschedulable", "message": "waiting for 8 GPUs",
      "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}]}})");
  absl::StatusOr<PodGroup> g = DecodePodGroup(j);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->workload_name, "job");
  EXPECT_EQ(g->template_name, "workers");
  EXPECT_FALSE(g->policy.basic);
  EXPECT_EQ(g->policy.gang_min_count, 8);
  EXPECT_EQ(g->topology_keys, (std::vector<std::string>{"tessera.dev/rack"}));
  EXPECT_EQ(g->priority, 1000);
  ASSERT_EQ(g->conditions.size(), 1u);
  EXPECT_EQ(g->conditions[0].observed_generation, 2);
  EXPECT_EQ(EncodePodGroup(*g), j);
  g->conditions[0].status = "True";
  g->conditions[0].reason = "Scheduled";
  g->topology_keys.clear();
  const Json out = EncodePodGroup(*g);
  EXPECT_EQ(out["status"]["conditions"][0]["reason"], "Scheduled");
  EXPECT_FALSE(out["spec"].contains("schedulingConstraints"));
  EXPECT_EQ(out["spec"]["disruptionMode"], Json::parse(R"({"all": {}})"));
}

TEST(GangCodecTest, MalformedGangsAreRefusedWithTheFieldNamed) {
  for (const char* spec : {R"({"schedulingPolicy": {"gang": {"minCount": 0}}})",
                           R"({"schedulingPolicy": {"gang": {}}})",
                           R"({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}})",
                           R"({"schedulingPolicy": {}})", R"({})"}) {
    const Json j = {{"metadata", {{"name", "g"}, {"namespace", "ml"}}},
                    {"spec", Json::parse(spec)}};
    absl::StatusOr<PodGroup> g = DecodePodGroup(j);
    ASSERT_FALSE(g.ok()) << spec;
    EXPECT_NE(g.status().message().find("PodGroup ml/g: spec.schedulingPolicy"),
              absl::string_view::npos)
        << g.status();
  }
  absl::StatusOr<PodGroup> basic =
      DecodePodGroup({{"metadata", {{"name", "b"}}},
                      {"spec", {{"schedulingPolicy", {{"basic", Json::object()}}}}}});
  ASSERT_TRUE(basic.ok()) << basic.status();
  EXPECT_TRUE(basic->policy.basic);
  EXPECT_FALSE(basic->policy.gang_min_count.has_value());
}

TEST(GangCodecTest, WorkloadTemplates) {
  const Json j = Json::parse(R"({"metadata": {"name": "job", "namespace": "ml"},
    "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "job"},
             "podGroupTemplates": [
               {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}},
                "resourceClaims": [{"name": "c", "resourceClaimTemplateName": "t"}]},
               {"name": "driver", "schedulingPolicy": {"basic": {}}}]}})");
  absl::StatusOr<Workload> w = DecodeWorkload(j);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->controller_kind, "Job");
  ASSERT_EQ(w->pod_group_templates.size(), 2u);
  EXPECT_EQ(w->pod_group_templates[0].policy.gang_min_count, 4);
  EXPECT_TRUE(w->pod_group_templates[1].policy.basic);
  w->pod_group_templates[0].policy.gang_min_count = 6;
  const Json out = EncodeWorkload(*w);
  EXPECT_EQ(out["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"], 6);
  EXPECT_EQ(out["spec"]["podGroupTemplates"][0]["resourceClaims"][0]["name"], "c");
  EXPECT_EQ(out["apiVersion"], "scheduling.k8s.io/v1alpha3");
  Json bad = j;
  bad["spec"]["podGroupTemplates"][1]["schedulingPolicy"] = Json::object();
  EXPECT_NE(DecodeWorkload(bad).status().message().find(
                "spec.podGroupTemplates[1].schedulingPolicy: exactly one of basic and gang"),
            absl::string_view::npos);
}

TEST(GangCodecTest, SchedulerPluginsPodGroup) {
  const Json j = Json::parse(R"({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
    "metadata": {"name": "pg", "namespace": "ml"},
    "spec": {"minMember": 3, "minResources": {"nvidia.com/gpu": "24"},
             "scheduleTimeoutSeconds": 60},
    "status": {"phase": "Scheduling", "running": 1, "scheduleStartTime": "2026-01-01T00:00:00Z"}})");
  absl::StatusOr<CoschedulingPodGroup> g = DecodeCoschedulingPodGroup(j);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->min_member, 3);
  EXPECT_EQ(g->min_resources.at("nvidia.com/gpu").Value(), 24);
  EXPECT_EQ(g->schedule_timeout_seconds, 60);
  EXPECT_EQ(g->phase, "Scheduling");
  EXPECT_EQ(g->running, 1);
  EXPECT_EQ(EncodeCoschedulingPodGroup(*g), j);
  absl::StatusOr<CoschedulingPodGroup> bad = DecodeCoschedulingPodGroup(Json::parse(
      R"({"metadata": {"name": "pg", "namespace": "ml"},
          "spec": {"minMember": 0, "scheduleTimeoutSeconds": -1,
                   "minResources": {"cpu": "x"}}})"));
  ASSERT_FALSE(bad.ok());
  const std::string msg(bad.status().message());
  EXPECT_NE(msg.find("spec.minMember: must be at least 1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("spec.scheduleTimeoutSeconds: must not be negative"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("spec.minResources.cpu"), std::string::npos) << msg;
  EXPECT_STREQ(kCoschedulingPodGroupLabel, "scheduling.x-k8s.io/pod-group");
}

}  // namespace
}  // namespace tessera::kube
