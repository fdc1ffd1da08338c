#include "deviceplugin/allocate.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "deviceplugin/preferred_allocation.h"

namespace tessera::deviceplugin {
namespace {

void AddDeviceSpec(const std::string& path, v1beta1::ContainerAllocateResponse* out) {
  v1beta1::DeviceSpec* spec = out->add_devices();
  spec->set_container_path(path);
  spec->set_host_path(path);
  spec->set_permissions("rw");
}

}  // namespace

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
    std::vector<std::string> ids;
    for (const PluginDevice* d : devices) ids.push_back(d->id);
    (*out->mutable_envs())["NVIDIA_VISIBLE_DEVICES"] = absl::StrJoin(ids, ",");
    absl::flat_hash_set<int> gpus;
    for (const PluginDevice* d : devices) {
      if (!gpus.insert(d->gpu_index).second) continue;
      // Without a reported minor number the enumeration index is the driver's usual minor.
      const int minor = d->minor.value_or(d->gpu_index);
      AddDeviceSpec(absl::StrCat(options.dev_dir, "/nvidia", minor), out);
    }
    for (const std::string& ctl : options.control_devices) {
      AddDeviceSpec(absl::StrCat(options.dev_dir, "/", ctl), out);
    }
    if (options.cdi) {
      for (const PluginDevice* d : devices) {
        out->add_cdi_devices()->set_name(absl::StrCat(options.cdi_kind, "=", d->id));
      }
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
