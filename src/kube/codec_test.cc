#include "kube/codec.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

// A Pod as kube-apiserver returns it, with fields the codec does not model (image pull policy,
// volumes, command) that an update must keep.
const char* kPodJson = R"({
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "train-0", "namespace": "ml", "uid": "u-1", "resourceVersion": "42",
    "labels": {"tessera.dev/queue": "research"}, "annotations": {"a": "b"},
    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j-1",
                         "controller": true}],
    "creationTimestamp": "2026-01-02T03:04:05Z"},
  "spec": {
    "schedulerName": "tessera",
    "containers": [{"name": "main", "image": "pytorch:2", "command": ["python", "train.py"],
      "imagePullPolicy": "IfNotPresent",
      "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "8"},
                    "limits": {"nvidia.com/gpu": 8}}}],
    "volumes": [{"name": "data", "emptyDir": {}}],
    "nodeSelector": {"nvidia.com/gpu.product": "H100"},
    "affinity": {
      "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "tessera.dev/rack", "operator": "In",
                               "values": ["r1", "r2"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
          {"weight": 10, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "Exists"}]}}]},
      "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                     "effect": "NoExecute", "tolerationSeconds": 300}],
    "priority": 1000, "priorityClassName": "high",
    "schedulingGates": [{"name": "tessera.dev/gang"}],
    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-template"}],
    "schedulingGroup": {"podGroupName": "train-group"}
  },
  "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
    "reason": "Unschedulable", "message": "0/3 nodes are available"}]}
})";

TEST(CodecTest, DecodesThePodFieldsASchedulerNeeds) {
  absl::StatusOr<Pod> p = DecodePod(Json::parse(kPodJson));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->metadata.name, "train-0");
  EXPECT_EQ(p->metadata.ns, "ml");
  EXPECT_EQ(p->metadata.resource_version, "42");
  EXPECT_EQ(p->metadata.labels.at("tessera.dev/queue"), "research");
  ASSERT_EQ(p->metadata.owner_references.size(), 1u);
  EXPECT_TRUE(p->metadata.owner_references[0].controller);
  EXPECT_EQ(p->metadata.owner_references[0].kind, "Job");
  EXPECT_EQ(ObjectKey(p->metadata), "ml/train-0");
  EXPECT_EQ(p->spec.scheduler_name, "tessera");
  ASSERT_EQ(p->spec.containers.size(), 1u);
  const Container& c = p->spec.containers[0];
  EXPECT_EQ(c.resources.requests.at("cpu").milli, 500);
  EXPECT_EQ(c.resources.requests.at("memory").Value(), int64_t{1} << 30);
  EXPECT_EQ(c.resources.requests.at("nvidia.com/gpu").Value(), 8);
  EXPECT_EQ(c.resources.limits.at("nvidia.com/gpu").Value(), 8);  // a bare JSON number
  EXPECT_EQ(p->spec.node_selector.at("nvidia.com/gpu.product"), "H100");
  ASSERT_TRUE(p->spec.node_affinity.has_value());
  ASSERT_TRUE(p->spec.node_affinity->required_terms.has_value());
  ASSERT_EQ(p->spec.node_affinity->required_terms->size(), 1u);
  const NodeSelectorRequirement& req =
      (*p->spec.node_affinity->required_terms)[0].match_expressions.at(0);
  EXPECT_EQ(req.key, "tessera.dev/rack");
  EXPECT_EQ(req.op, "In");
  EXPECT_EQ(req.values, (std::vector<std::string>{"r1", "r2"}));
  ASSERT_EQ(p->spec.node_affinity->preferred.size(), 1u);
  EXPECT_EQ(p->spec.node_affinity->preferred[0].weight, 10);
  ASSERT_EQ(p->spec.tolerations.size(), 2u);
  EXPECT_EQ(p->spec.tolerations[1].toleration_seconds, 300);
  EXPECT_EQ(p->spec.priority, 1000);
  EXPECT_EQ(p->spec.priority_class_name, "high");
  EXPECT_EQ(p->spec.scheduling_gates, (std::vector<std::string>{"tessera.dev/gang"}));
  ASSERT_EQ(p->spec.resource_claims.size(), 1u);
  EXPECT_EQ(p->spec.resource_claims[0].resource_claim_template_name, "gpu-template");
  EXPECT_EQ(p->spec.pod_group_name, "train-group");
  EXPECT_EQ(p->status.phase, "Pending");
  ASSERT_EQ(p->status.conditions.size(), 1u);
  EXPECT_EQ(p->status.conditions[0].reason, "Unschedulable");
}

TEST(CodecTest, EncodingAPodKeepsWhatItDoesNotModel) {
  absl::StatusOr<Pod> p = DecodePod(Json::parse(kPodJson));
  ASSERT_TRUE(p.ok()) << p.status();
  p->spec.node_name = "n7";
  p->spec.scheduling_gates.clear();
  p->metadata.labels["bound"] = "yes";
  p->spec.containers[0].resources.requests.erase("cpu");
  const Json j = EncodePod(*p);
  EXPECT_EQ(j["spec"]["nodeName"], "n7");
  EXPECT_FALSE(j["spec"].contains("schedulingGates"));
  EXPECT_EQ(j["metadata"]["labels"]["bound"], "yes");
  EXPECT_EQ(j["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(j["spec"]["containers"][0]["command"], Json::parse(R"(["python", "train.py"])"));
  EXPECT_EQ(j["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
  EXPECT_FALSE(j["spec"]["containers"][0]["resources"]["requests"].contains("cpu"));
  EXPECT_EQ(j["spec"]["containers"][0]["resources"]["requests"]["memory"], "1Gi");
  EXPECT_EQ(j["spec"]["volumes"][0]["name"], "data");
  EXPECT_TRUE(j["spec"]["affinity"].contains("podAntiAffinity"));
  // Round trip: decoding the encoding gives the same typed values.
  absl::StatusOr<Pod> again = DecodePod(j);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->spec.node_name, "n7");
  EXPECT_EQ(again->spec.tolerations.size(), 2u);
  EXPECT_EQ(again->spec.pod_group_name, "train-group");
  EXPECT_EQ(EncodePod(*again), j);
}

TEST(CodecTest, APodBuiltFromScratchEncodesAsTheApiWants) {
  Pod p;
  p.metadata.name = "p";
  p.metadata.ns = "default";
  Container c;
  c.name = "c";
  c.image = "busybox";
  c.resources.requests["nvidia.com/gpu"] = UnitsQuantity(1);
  p.spec.containers.push_back(c);
  p.spec.scheduler_name = "tessera";
  const Json j = EncodePod(p);
  EXPECT_EQ(j["apiVersion"], "v1");
  EXPECT_EQ(j["kind"], "Pod");
  EXPECT_EQ(j["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "1");
  EXPECT_FALSE(j["spec"].contains("affinity"));
  EXPECT_FALSE(j["metadata"].contains("labels"));
  EXPECT_FALSE(j.contains("status"));
}

TEST(CodecTest, BadFieldsAreAllNamedAtOnce) {
  Json j = Json::parse(kPodJson);
  j["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots";
  j["metadata"]["labels"]["x"] = 3;
  j["spec"]["priority"] = "high";
  j["spec"]["tolerations"] = "none";
  absl::StatusOr<Pod> p = DecodePod(j);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(p.status().message());
  EXPECT_NE(msg.find("Pod ml/train-0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("spec.containers[0].resources.requests.cpu: quantity \"lots\""),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("metadata.labels.x: must be a string"), std::string::npos) << msg;
  EXPECT_NE(msg.find("spec.priority: must be an integer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("spec.tolerations: must be a list"), std::string::npos) << msg;
  EXPECT_FALSE(DecodePod(Json::array()).ok());
}

TEST(CodecTest, NodeTaintsAndResources) {
  const Json j = Json::parse(R"({"apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "n1", "labels": {"tessera.dev/rack": "r1"},
                 "annotations": {"tessera.dev/nvlink-islands": "0-3,4-7"}},
    "spec": {"unschedulable": true, "podCIDR": "10.0.0.0/24",
             "taints": [{"key": "gpu", "value": "h100", "effect": "NoSchedule",
                         "timeAdded": "2026-01-01T00:00:00Z"}]},
    "status": {"capacity": {"cpu": "64", "nvidia.com/gpu": "8", "pods": "110"},
               "allocatable": {"cpu": "63500m", "memory": "500Gi", "nvidia.com/gpu": "8",
                               "nvidia.com/mig-1g.10gb": "7"},
               "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                               "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}})");
  absl::StatusOr<Node> n = DecodeNode(j);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(n->unschedulable);
  ASSERT_EQ(n->taints.size(), 1u);
  EXPECT_EQ(n->taints[0].effect, "NoSchedule");
  EXPECT_EQ(n->allocatable.at("cpu").milli, 63500);
  EXPECT_EQ(n->allocatable.at("nvidia.com/mig-1g.10gb").Value(), 7);
  EXPECT_EQ(n->capacity.at("pods").Value(), 110);
  EXPECT_EQ(n->metadata.annotations.at("tessera.dev/nvlink-islands"), "0-3,4-7");
  EXPECT_EQ(n->conditions.at(0).type, "Ready");
  n->unschedulable = false;
  const Json out = EncodeNode(*n);
  EXPECT_FALSE(out["spec"].contains("unschedulable"));
  EXPECT_EQ(out["spec"]["podCIDR"], "10.0.0.0/24");
  EXPECT_EQ(out["spec"]["taints"][0]["timeAdded"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(out["status"]["conditions"][0]["lastHeartbeatTime"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(DecodeNode(out)->allocatable, n->allocatable);
}

TEST(CodecTest, PriorityClassLeaseEventAndPdb) {
  absl::StatusOr<PriorityClass> pc = DecodePriorityClass(Json::parse(
      R"({"metadata": {"name": "high"}, "value": 100000, "globalDefault": false,
          "preemptionPolicy": "Never", "description": "d"})"));
  ASSERT_TRUE(pc.ok()) << pc.status();
  EXPECT_EQ(pc->value, 100000);
  EXPECT_EQ(pc->preemption_policy, "Never");
  EXPECT_EQ(EncodePriorityClass(*pc)["apiVersion"], "scheduling.k8s.io/v1");

  absl::StatusOr<Lease> l = DecodeLease(Json::parse(
      R"({"metadata": {"name": "tessera-scheduler", "namespace": "kube-system",
                       "resourceVersion": "7"},
          "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                   "acquireTime": "2026-01-02T03:04:05.000001Z",
                   "renewTime": "2026-01-02T03:04:06.500000Z", "leaseTransitions": 3}})"));
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->holder_identity, "a");
  EXPECT_EQ(l->lease_transitions, 3);
  absl::StatusOr<absl::Time> renew = ParseApiTime(*l->renew_time);
  ASSERT_TRUE(renew.ok()) << renew.status();
  EXPECT_EQ(FormatMicroTime(*renew), "2026-01-02T03:04:06.500000Z");
  const Json lj = EncodeLease(*l);
  EXPECT_EQ(lj["metadata"]["resourceVersion"], "7");
  EXPECT_EQ(lj["spec"]["leaseDurationSeconds"], 15);
  EXPECT_FALSE(ParseApiTime("yesterday").ok());

  Event e;
  e.metadata.name = "p.1";
  e.metadata.ns = "ml";
  e.event_time = FormatMicroTime(absl::FromUnixSeconds(1767225600));
  e.reporting_controller = "tessera.dev/scheduler";
  e.reporting_instance = "tessera-scheduler-0";
  e.action = "Binding";
  e.reason = "Scheduled";
  e.type = "Normal";
  e.note = "Successfully assigned ml/p to n1";
  e.regarding = {"v1", "Pod", "ml", "p", "u-1", "", ""};
  const Json ej = EncodeEvent(e);
  EXPECT_EQ(ej["apiVersion"], "events.k8s.io/v1");
  EXPECT_EQ(ej["eventTime"], "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(ej["regarding"]["kind"], "Pod");
  EXPECT_FALSE(ej.contains("related"));
  absl::StatusOr<Event> back = DecodeEvent(ej);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->note, e.note);
  EXPECT_EQ(back->regarding.uid, "u-1");

  absl::StatusOr<PodDisruptionBudget> pdb = DecodePodDisruptionBudget(Json::parse(
      R"({"metadata": {"name": "pdb", "namespace": "ml"},
          "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "x"},
                   "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                         "values": ["db"]}]}},
          "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2,
                     "expectedPods": 4, "observedGeneration": 1}})"));
  ASSERT_TRUE(pdb.ok()) << pdb.status();
  ASSERT_TRUE(pdb->min_available.has_value());
  EXPECT_TRUE(pdb->min_available->is_string);
  EXPECT_EQ(pdb->min_available->str_value, "50%");
  EXPECT_FALSE(pdb->max_unavailable.has_value());
  EXPECT_EQ(pdb->disruptions_allowed, 1);
  EXPECT_EQ(pdb->selector->match_expressions.at(0).op, "NotIn");
  pdb->min_available = IntOrString{false, 2, ""};
  EXPECT_EQ(EncodePodDisruptionBudget(*pdb)["spec"]["minAvailable"], 2);
  EXPECT_FALSE(DecodePodDisruptionBudget(
                   Json::parse(R"({"metadata": {"name": "x"}, "spec": {"maxUnavailable": true}})"))
                   .ok());
}

TEST(CodecTest, BindingAndEvictionBodies) {
  const Json b = EncodeBinding({"ml", "p", "u-1", "n3"});
  EXPECT_EQ(b["kind"], "Binding");
  EXPECT_EQ(b["metadata"]["name"], "p");
  EXPECT_EQ(b["metadata"]["uid"], "u-1");
  EXPECT_EQ(b["target"]["kind"], "Node");
  EXPECT_EQ(b["target"]["name"], "n3");
  const Json e = EncodeEviction({"ml", "p", "u-1", 30});
  EXPECT_EQ(e["apiVersion"], "policy/v1");
  EXPECT_EQ(e["deleteOptions"]["gracePeriodSeconds"], 30);
  EXPECT_EQ(e["deleteOptions"]["preconditions"]["uid"], "u-1");
  EXPECT_FALSE(EncodeEviction({"ml", "p", "", std::nullopt}).contains("deleteOptions"));
}

}  // namespace
}  // namespace tessera::kube
