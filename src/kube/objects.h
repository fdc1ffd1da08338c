// Typed Kubernetes objects: the fields of Pod, Node, PriorityClass, Lease, events.k8s.io/v1 Event,
// PodDisruptionBudget and the Binding/Eviction bodies that a scheduler reads or writes.
//
// Each top-level object keeps the JSON it was decoded from (`raw`): encoding overlays the typed
// fields on it, so that an update of a decoded object keeps every field these structs do not model
// (a Pod's image, volumes, ...). A default-constructed object has an empty `raw`.
// Field names follow the API's JSON names in snake_case; optional API fields are std::optional
// where "absent" differs from the zero value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kube/quantity.h"
#include "nlohmann/json.hpp"

namespace tessera::kube {

using Json = nlohmann::json;

struct OwnerReference {
  std::string api_version, kind, name, uid;
  bool controller = false;
  bool block_owner_deletion = false;
};

struct ObjectMeta {
  std::string name, generate_name, ns, uid, resource_version;
  int64_t generation = 0;
  std::string creation_timestamp;                 // RFC 3339, as the API wrote it
  std::optional<std::string> deletion_timestamp;  // set: the object is being deleted
  std::map<std::string, std::string> labels, annotations;
  std::vector<OwnerReference> owner_references;
  std::vector<std::string> finalizers;
};

// "NS/NAME" (or "NAME" for a cluster-scoped object): the informer cache's key.
std::string ObjectKey(const ObjectMeta& m);

// --- Pod ---------------------------------------------------------------------------------------

struct ResourceRequirements {
  ResourceList requests, limits;
};

struct Container {
  std::string name, image;
  ResourceRequirements resources;
};

// Operators: In, NotIn, Exists, DoesNotExist, Gt, Lt (as the API spells them).
struct NodeSelectorRequirement {
  std::string key, op;
  std::vector<std::string> values;
};
struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions, match_fields;
};
struct PreferredSchedulingTerm {
  int32_t weight = 0;
  NodeSelectorTerm preference;
};
struct NodeAffinity {
  // requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms (ORed); nullopt: no rule.
  std::optional<std::vector<NodeSelectorTerm>> required_terms;
  std::vector<PreferredSchedulingTerm> preferred;
};

struct Toleration {
  std::string key, op, value, effect;  // op: "Equal" (default) or "Exists"; effect "" = all
  std::optional<int64_t> toleration_seconds;
};

struct PodResourceClaim {
  std::string name;
  std::optional<std::string> resource_claim_name, resource_claim_template_name;
};

struct PodCondition {
  std::string type, status, reason, message, last_transition_time;
};

struct PodSpec {
  std::string scheduler_name;  // empty on the wire means "default-scheduler"
  std::string node_name;
  std::vector<Container> containers, init_containers;
  std::map<std::string, std::string> node_selector;
  std::optional<NodeAffinity> node_affinity;  // spec.affinity.nodeAffinity
  std::vector<Toleration> tolerations;
  std::optional<int32_t> priority;
  std::string priority_class_name, preemption_policy;
  std::vector<std::string> scheduling_gates;  // spec.schedulingGates[].name
  std::vector<PodResourceClaim> resource_claims;
  // spec.schedulingGroup.podGroupName (KEP-4671, scheduling.k8s.io/v1alpha3 PodGroup; needs the
  // GenericWorkload feature gate on the apiserver).
  std::optional<std::string> pod_group_name;
  std::optional<int64_t> termination_grace_period_seconds;
  ResourceList overhead;
};

struct PodStatus {
  std::string phase;  // Pending, Running, Succeeded, Failed, Unknown
  std::vector<PodCondition> conditions;
  std::string nominated_node_name;
};

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct Pod {
  ObjectMeta metadata;
  PodSpec spec;
  PodStatus status;
  Json raw;
};

// --- Node --------------------------------------------------------------------------------------

struct Taint {
  std::string key, value, effect;  // effect: NoSchedule, PreferNoSchedule, NoExecute
};

struct NodeCondition {
  std::string type, status, reason, message;
};

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct Node {
  ObjectMeta metadata;
  bool unschedulable = false;
  std::vector<Taint> taints;
  ResourceList capacity, allocatable;
  std::vector<NodeCondition> conditions;
  Json raw;
};

// --- scheduling.k8s.io/v1 PriorityClass --------------------------------------------------------

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct PriorityClass {
  ObjectMeta metadata;
  int32_t value = 0;
  bool global_default = false;
  std::string description, preemption_policy;  // PreemptLowerPriority (default) or Never
  Json raw;
};

// --- coordination.k8s.io/v1 Lease --------------------------------------------------------------

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct Lease {
  ObjectMeta metadata;
  std::optional<std::string> holder_identity;
  std::optional<int32_t> lease_duration_seconds;
  std::optional<std::string> acquire_time, renew_time;  // RFC 3339 with microseconds
  std::optional<int32_t> lease_transitions;
  Json raw;
};

// --- events.k8s.io/v1 Event --------------------------------------------------------------------

struct ObjectReference {
  std::string api_version, kind, ns, name, uid, resource_version, field_path;
};

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct Event {
  ObjectMeta metadata;
  std::string event_time;            // MicroTime, required
  std::string reporting_controller;  // e.g. "tessera.dev/scheduler"
  std::string reporting_instance;    // e.g. "tessera-scheduler-<host>"
  std::string action;                // e.g. "Binding"
  std::string reason;                // e.g. "Scheduled"
  std::string type;                  // Normal or Warning
  std::string note;                  // the human-readable message
  ObjectReference regarding;
  std::optional<ObjectReference> related;
  Json raw;
};

// --- policy/v1 PodDisruptionBudget -------------------------------------------------------------

struct LabelSelectorRequirement {
  std::string key, op;  // In, NotIn, Exists, DoesNotExist
  std::vector<std::string> values;
};
struct LabelSelector {
  std::map<std::string, std::string> match_labels;
  std::vector<LabelSelectorRequirement> match_expressions;
};

// An IntOrString ("50%" or 2).
struct IntOrString {
  bool is_string = false;
  int32_t int_value = 0;
  std::string str_value;
};

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct PodDisruptionBudget {
  ObjectMeta metadata;
  std::optional<IntOrString> min_available, max_unavailable;
  std::optional<LabelSelector> selector;
  // status
  int64_t observed_generation = 0;
  int32_t disruptions_allowed = 0, current_healthy = 0, desired_healthy = 0, expected_pods = 0;
  Json raw;
};

// --- request bodies ----------------------------------------------------------------------------

// POST pods/NAME/binding: binds pod NS/NAME to `node`.
struct Binding {
  std::string ns, pod_name, pod_uid;  // uid: bind only that incarnation (may be empty)
  std::string node;
  // Added to the Pod's annotations by the apiserver as it binds (BindingREST does so).
  std::map<std::string, std::string> annotations;
};

// POST pods/NAME/eviction (policy/v1 Eviction); the apiserver checks PodDisruptionBudgets.
struct Eviction {
  std::string ns, pod_name, pod_uid;
  std::optional<int64_t> grace_period_seconds;
};

}  // namespace tessera::kube
