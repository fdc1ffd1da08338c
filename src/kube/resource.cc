#include "kube/resource.h"

#include "absl/strings/str_cat.h"

namespace tessera::kube {

std::string ResourcePath(const ResourceType& t, absl::string_view ns, absl::string_view name,
                         absl::string_view subresource) {
  std::string p = t.group.empty() ? absl::StrCat("/api/", t.version)
                                  : absl::StrCat("/apis/", t.group, "/", t.version);
  if (t.namespaced && !ns.empty()) absl::StrAppend(&p, "/namespaces/", ns);
  absl::StrAppend(&p, "/", t.plural);
  if (!name.empty()) absl::StrAppend(&p, "/", name);
  if (!subresource.empty()) absl::StrAppend(&p, "/", subresource);
  return p;
}

std::string DescribeObject(const ResourceType& t, absl::string_view ns, absl::string_view name) {
  if (!t.namespaced || ns.empty()) return absl::StrCat(t.plural, name.empty() ? "" : " ", name);
  return absl::StrCat(t.plural, " ", ns, name.empty() ? "" : "/", name);
}

#define TESSERA_KUBE_RESOURCE(fn, group, version, plural, kind, namespaced)                    \
  const ResourceType& fn() {                                                                   \
    static const ResourceType* t = new ResourceType{group, version, plural, kind, namespaced}; \
    return *t;                                                                                 \
  }
TESSERA_KUBE_RESOURCE(PodsResource, "", "v1", "pods", "Pod", true)
TESSERA_KUBE_RESOURCE(NodesResource, "", "v1", "nodes", "Node", false)
TESSERA_KUBE_RESOURCE(NamespacesResource, "", "v1", "namespaces", "Namespace", false)
TESSERA_KUBE_RESOURCE(ConfigMapsResource, "", "v1", "configmaps", "ConfigMap", true)
TESSERA_KUBE_RESOURCE(PriorityClassesResource, "scheduling.k8s.io", "v1", "priorityclasses",
                      "PriorityClass", false)
TESSERA_KUBE_RESOURCE(LeasesResource, "coordination.k8s.io", "v1", "leases", "Lease", true)
TESSERA_KUBE_RESOURCE(EventsResource, "events.k8s.io", "v1", "events", "Event", true)
TESSERA_KUBE_RESOURCE(PodDisruptionBudgetsResource, "policy", "v1", "poddisruptionbudgets",
                      "PodDisruptionBudget", true)
TESSERA_KUBE_RESOURCE(WorkloadsResource, "scheduling.k8s.io", "v1alpha3", "workloads", "Workload",
                      true)
TESSERA_KUBE_RESOURCE(PodGroupsResource, "scheduling.k8s.io", "v1alpha3", "podgroups", "PodGroup",
                      true)
TESSERA_KUBE_RESOURCE(CoschedulingPodGroupsResource, "scheduling.x-k8s.io", "v1alpha1", "podgroups",
                      "PodGroup", true)
TESSERA_KUBE_RESOURCE(ServicesResource, "", "v1", "services", "Service", true)
TESSERA_KUBE_RESOURCE(CustomResourceDefinitionsResource, "apiextensions.k8s.io", "v1",
                      "customresourcedefinitions", "CustomResourceDefinition", false)
TESSERA_KUBE_RESOURCE(TrainingJobsResource, "tessera.dev", "v1", "trainingjobs", "TrainingJob",
                      true)
TESSERA_KUBE_RESOURCE(InferenceServicesResource, "tessera.dev", "v1", "inferenceservices",
                      "InferenceService", true)
TESSERA_KUBE_RESOURCE(GpuPoolsResource, "tessera.dev", "v1", "gpupools", "GPUPool", true)
TESSERA_KUBE_RESOURCE(CheckpointsResource, "tessera.dev", "v1", "checkpoints", "Checkpoint", true)
TESSERA_KUBE_RESOURCE(ModelVersionsResource, "tessera.dev", "v1", "modelversions", "ModelVersion",
                      true)
TESSERA_KUBE_RESOURCE(QueuesResource, "tessera.dev", "v1", "queues", "Queue", false)
TESSERA_KUBE_RESOURCE(ResourceSlicesResource, "resource.k8s.io", "v1", "resourceslices",
                      "ResourceSlice", false)
TESSERA_KUBE_RESOURCE(ResourceClaimsResource, "resource.k8s.io", "v1", "resourceclaims",
                      "ResourceClaim", true)
TESSERA_KUBE_RESOURCE(DeviceClassesResource, "resource.k8s.io", "v1", "deviceclasses",
                      "DeviceClass", false)
#undef TESSERA_KUBE_RESOURCE

}  // namespace tessera::kube
