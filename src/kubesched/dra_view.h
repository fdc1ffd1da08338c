// `tessera gpus --dra`: the GPUs of the cluster's ResourceSlices as `tessera scheduler` sees
// them (claims.h): per node, each whole GPU of gpu.tessera.dev at its index with product,
// memory and NVLink island, the GPU indices missing from the slice (unhealthy), and the claim
// each device is allocated to. Other devices (MIG instances, other drivers) are listed by name.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "nlohmann/json.hpp"

namespace tessera::kubesched {

// The table for `slices` and `claims` (resource.k8s.io/v1 objects), only `node` when non-empty.
std::string RenderDraView(const std::vector<nlohmann::json>& slices,
                          const std::vector<nlohmann::json>& claims, const std::string& node);

// Adds --dra, --kubeconfig and --node to the `gpus` subcommand (registered by the agent module):
// with --dra it prints RenderDraView of the cluster instead of this node's GPUs.
void RegisterDraView(CLI::App& app);

}  // namespace tessera::kubesched
