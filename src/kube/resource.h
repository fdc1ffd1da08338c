// ResourceType: where a kind of object lives in the API ("/api/v1/namespaces/NS/pods",
// "/apis/coordination.k8s.io/v1/namespaces/NS/leases"), and the types this client knows.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace tessera::kube {

struct ResourceType {
  std::string group;    // "" for the core group
  std::string version;  // "v1"
  std::string plural;   // "pods"
  std::string kind;     // "Pod"
  bool namespaced = true;
};

// The path of a collection (`name` empty), an object, or an object's subresource. `ns` empty for
// a namespaced type means all namespaces (a list or watch across them).
std::string ResourcePath(const ResourceType& t, absl::string_view ns, absl::string_view name = "",
                         absl::string_view subresource = "");

// "pods team-a/p0", "nodes n1", "pods team-a" (a collection): the object in error messages.
std::string DescribeObject(const ResourceType& t, absl::string_view ns, absl::string_view name);

const ResourceType& PodsResource();
const ResourceType& NodesResource();
const ResourceType& NamespacesResource();
const ResourceType& ConfigMapsResource();
const ResourceType& PriorityClassesResource();
const ResourceType& LeasesResource();
const ResourceType& EventsResource();  // events.k8s.io/v1
const ResourceType& PodDisruptionBudgetsResource();
// scheduling.k8s.io/v1alpha3 (KEP-4671; GenericWorkload feature gate and runtime-config).
const ResourceType& WorkloadsResource();
const ResourceType& PodGroupsResource();
// scheduling.x-k8s.io/v1alpha1 PodGroup of sigs.k8s.io/scheduler-plugins (a CRD).
const ResourceType& CoschedulingPodGroupsResource();
const ResourceType& ServicesResource();
const ResourceType& CustomResourceDefinitionsResource();  // apiextensions.k8s.io/v1
// tessera.dev/v1, the CRDs of deploy/kubernetes/crds (generated from the API's schema table).
const ResourceType& TrainingJobsResource();
const ResourceType& InferenceServicesResource();
const ResourceType& GpuPoolsResource();
const ResourceType& CheckpointsResource();
const ResourceType& ModelVersionsResource();
const ResourceType& QueuesResource();  // cluster-scoped
// resource.k8s.io/v1, Dynamic Resource Allocation (GA since Kubernetes 1.34).
const ResourceType& ResourceSlicesResource();  // cluster-scoped
const ResourceType& ResourceClaimsResource();
const ResourceType& DeviceClassesResource();  // cluster-scoped

}  // namespace tessera::kube
