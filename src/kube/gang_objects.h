// Typed gang objects: KEP-4671's scheduling.k8s.io/v1alpha3 Workload and PodGroup (what
// kube-apiserver v1.37 serves with the GenericWorkload gate; a Pod names its group in
// spec.schedulingGroup.podGroupName) and the scheduling.x-k8s.io/v1alpha1 PodGroup of
// sigs.k8s.io/scheduler-plugins' coscheduling (a CRD; Pods name it with the label
// scheduling.x-k8s.io/pod-group).
// Like objects.h, each keeps the JSON it was decoded from (`raw`) and encoding overlays the typed
// fields on it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kube/objects.h"

namespace tessera::kube {

// metav1.Condition (status.conditions of PodGroup).
struct Condition {
  std::string type, status, reason, message, last_transition_time;
  int64_t observed_generation = 0;
};

// PodGroupSchedulingPolicy: exactly one of basic and gang in the API.
struct GroupPolicy {
  bool basic = false;
  std::optional<int32_t> gang_min_count;  // set: all-or-nothing for at least this many pods
};

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct PodGroup {
  ObjectMeta metadata;
  std::optional<std::string> workload_name, template_name;  // spec.workloadRef
  GroupPolicy policy;
  std::vector<std::string> topology_keys;  // spec.schedulingConstraints.topology[].key
  std::string priority_class_name, preemption_policy;
  std::optional<int32_t> priority;
  std::vector<Condition> conditions;  // status
  Json raw;
};

struct PodGroupTemplate {
  std::string name;
  GroupPolicy policy;
  std::vector<std::string> topology_keys;
  std::string priority_class_name;
  std::optional<int32_t> priority;
};

// NOLINTNEXTLINE(bugprone-exception-escape)
struct Workload {
  ObjectMeta metadata;
  std::optional<std::string> controller_api_group, controller_kind, controller_name;
  std::vector<PodGroupTemplate> pod_group_templates;
  Json raw;
};

// The label a Pod carries to join a scheduler-plugins PodGroup.
inline constexpr char kCoschedulingPodGroupLabel[] = "scheduling.x-k8s.io/pod-group";

// NOLINTNEXTLINE(bugprone-exception-escape)
struct CoschedulingPodGroup {
  ObjectMeta metadata;
  int32_t min_member = 0;
  ResourceList min_resources;
  std::optional<int32_t> schedule_timeout_seconds;
  // status: phase Pending, Scheduling, Running, Finished, Failed or Unknown.
  std::string phase, occupied_by, schedule_start_time;
  int32_t running = 0, succeeded = 0, failed = 0;
  Json raw;
};

// Decoders also refuse what a scheduler cannot act on (a negative or zero gang size, a policy
// that is both or neither basic and gang), naming the field.
absl::StatusOr<PodGroup> DecodePodGroup(const Json& j);
Json EncodePodGroup(const PodGroup& g);
absl::StatusOr<Workload> DecodeWorkload(const Json& j);
Json EncodeWorkload(const Workload& w);
absl::StatusOr<CoschedulingPodGroup> DecodeCoschedulingPodGroup(const Json& j);
Json EncodeCoschedulingPodGroup(const CoschedulingPodGroup& g);

}  // namespace tessera::kube
