#include "deviceplugin/allocate.h"

#include <sys/stat.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "deviceplugin/preferred_allocation.h"

namespace tessera::deviceplugin {
namespace {

constexpr char kCdiAnnotationPrefix[] = "cdi.k8s.io/";
constexpr char kCdiAnnotationPlugin[] = "tessera-device-plugin";

// Adds /dev/<node> when the host has it at <dev_root>/dev/<node>.
void AddDeviceSpec(const std::string& node, const AllocateOptions& options,
                   v1beta1::ContainerAllocateResponse* out) {
  std::string root = options.dev_root;
  while (!root.empty() && root.back() == '/') root.pop_back();
  const std::string host = absl::StrCat(root, "/dev/", node);
  if (options.node_exists && !options.node_exists(host)) return;
  v1beta1::DeviceSpec* spec = out->add_devices();
  spec->set_container_path(absl::StrCat("/dev/", node));
  spec->set_host_path(host);
  spec->set_permissions("rw");
}

// The annotation key of container-device-interface's AnnotationKey(plugin, id): at most 63
// characters after the prefix, alphanumeric at both ends, '-', '_' and '.' inside ('/' -> '_').
std::string CdiAnnotationKey(const std::string& first_id) {
  std::string name = absl::StrCat(kCdiAnnotationPlugin, "_", first_id);
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      c = '_';
    }
  }
  if (name.size() > 63) name.resize(63);
  while (!name.empty() && !absl::ascii_isalnum(static_cast<unsigned char>(name.back()))) {
    name.pop_back();
  }
  return absl::StrCat(kCdiAnnotationPrefix, name);
}

}  // namespace

absl::StatusOr<DeviceListStrategies> ParseDeviceListStrategies(
    const std::vector<std::string>& names) {
  DeviceListStrategies s{false, false, false};
  std::vector<std::string> problems;
  for (const std::string& n : names) {
    bool* flag = n == "envvar"            ? &s.envvar
                 : n == "cdi-annotations" ? &s.cdi_annotations
                 : n == "cdi-cri"         ? &s.cdi_cri
                                          : nullptr;
    if (flag == nullptr) {
      problems.push_back(
          n == "volume-mounts"
              ? "'volume-mounts' is not supported"
              : absl::StrCat("'", n, "' is not one of envvar, cdi-annotations, cdi-cri"));
    } else if (*flag) {
      problems.push_back(absl::StrCat("'", n, "' given twice"));
    } else {
      *flag = true;
    }
  }
  if (problems.empty() && !s.envvar && !s.cdi_annotations && !s.cdi_cri) {
    problems.push_back("at least one strategy is needed");
  }
  if (!problems.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("device list strategy: ", absl::StrJoin(problems, "; ")));
  }
  return s;
}

std::string DeviceListStrategiesName(const DeviceListStrategies& s) {
  std::vector<std::string> names;
  if (s.envvar) names.push_back("envvar");
  if (s.cdi_annotations) names.push_back("cdi-annotations");
  if (s.cdi_cri) names.push_back("cdi-cri");
  return absl::StrJoin(names, ",");
}

bool DeviceNodeExistsOnHost(const std::string& host_path) {
  struct stat st;
  return ::stat(host_path.c_str(), &st) == 0;
}

absl::StatusOr<v1beta1::AllocateResponse> BuildAllocateResponse(
    const v1beta1::AllocateRequest& request, const Resource& resource, const HealthFn& healthy,
    const AllocateOptions& options) {
  absl::flat_hash_map<std::string, const PluginDevice*> by_id;
  for (const PluginDevice& d : resource.devices) by_id[d.id] = &d;

  // Validate everything before building anything: the request fails as a whole.
  std::vector<std::vector<const PluginDevice*>> containers;
  absl::flat_hash_set<std::string> seen;
  for (int c = 0; c < request.container_requests_size(); ++c) {
    const v1beta1::ContainerAllocateRequest& creq = request.container_requests(c);
    if (creq.devices_ids_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("container_requests[", c, "].devices_ids: empty"));
    }
    std::vector<const PluginDevice*> devices;
    for (int i = 0; i < creq.devices_ids_size(); ++i) {
      const std::string& id = creq.devices_ids(i);
      const std::string field = absl::StrCat("container_requests[", c, "].devices_ids[", i, "]");
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": unknown device '", id, "' for resource ", resource.name));
      }
      if (!seen.insert(id).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": device '", id, "' is requested more than once"));
      }
      if (!healthy(it->second->gpu_uuid)) {
        return absl::FailedPreconditionError(
            absl::StrCat(field, ": device '", id, "' is unhealthy and cannot be allocated"));
      }
      devices.push_back(it->second);
    }
    containers.push_back(std::move(devices));
  }

  v1beta1::AllocateResponse response;
  for (const std::vector<const PluginDevice*>& devices : containers) {
    v1beta1::ContainerAllocateResponse* out = response.add_container_responses();
    std::vector<std::string> ids, cdi_names;
    for (const PluginDevice* d : devices) {
      ids.push_back(d->id);
      cdi_names.push_back(absl::StrCat(options.cdi_kind, "=", d->id));
    }
    const DeviceListStrategies& s = options.strategies;
    if (s.envvar) {
      (*out->mutable_envs())["NVIDIA_VISIBLE_DEVICES"] = absl::StrJoin(ids, ",");
      absl::flat_hash_set<int> gpus;
      for (const PluginDevice* d : devices) {
        if (!gpus.insert(d->gpu_index).second) continue;
        // Without a reported minor number the enumeration index is the driver's usual minor.
        AddDeviceSpec(absl::StrCat("nvidia", d->minor.value_or(d->gpu_index)), options, out);
      }
      for (const std::string& ctl : options.control_devices) AddDeviceSpec(ctl, options, out);
    }
    if (s.cdi_annotations) {
      (*out->mutable_annotations())[CdiAnnotationKey(ids.front())] = absl::StrJoin(cdi_names, ",");
    }
    if (s.cdi_cri) {
      for (const std::string& name : cdi_names) out->add_cdi_devices()->set_name(name);
    }
  }
  return response;
}

absl::StatusOr<v1beta1::PreferredAllocationResponse> BuildPreferredAllocationResponse(
    const v1beta1::PreferredAllocationRequest& request, const Resource& resource,
    const agent::TopologyMatrix& topology) {
  v1beta1::PreferredAllocationResponse response;
  for (int c = 0; c < request.container_requests_size(); ++c) {
    const v1beta1::ContainerPreferredAllocationRequest& creq = request.container_requests(c);
    std::vector<std::string> available(creq.available_deviceids().begin(),
                                       creq.available_deviceids().end());
    std::vector<std::string> must(creq.must_include_deviceids().begin(),
                                  creq.must_include_deviceids().end());
    absl::StatusOr<std::vector<std::string>> chosen =
        PreferredAllocation(resource.devices, topology, available, must, creq.allocation_size());
    if (!chosen.ok()) {
      return absl::Status(chosen.status().code(),
                          absl::StrCat("container_requests[", c, "].", chosen.status().message(),
                                       " (resource ", resource.name, ")"));
    }
    v1beta1::ContainerPreferredAllocationResponse* out = response.add_container_responses();
    for (const std::string& id : *chosen) out->add_deviceids(id);
  }
  return response;
}

}  // namespace tessera::deviceplugin
