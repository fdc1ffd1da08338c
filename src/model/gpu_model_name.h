// GPU model names: what a job asks for (`spec.gpuModels`, a group's `gpuType`) against what a
// node has (NVML's full product string on a real node: "NVIDIA H100 80GB HBM3").
//
// A request matches a node's model when the two are equal, or when the request is a short alias:
// a GPU family of the table below, optionally followed by '-'-separated qualifiers ("H100",
// "A100-80GB", "H100-PCIe"), and the family and every qualifier are words of the node's model
// name (words split at spaces and '-', compared case-insensitively). So "H100" matches "NVIDIA
// H100 80GB HBM3" and "NVIDIA H100 PCIe"; "A100-80GB" matches "NVIDIA A100-SXM4-80GB" and
// "NVIDIA A100 80GB PCIe" but not "NVIDIA A100-SXM4-40GB"; "L40" does not match "NVIDIA L40S",
// nor "A10" "NVIDIA A100". A word outside the table ("NVIDIA", "80GB") is never an alias, so it
// cannot match a whole fleet. docs/scheduler.md has the table.
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::model {

// The families a short alias may start with (upper case), e.g. "H100", "A100", "L40S".
const std::vector<std::string>& GpuFamilies();

// True when a job asking for `requested` may run on a GPU whose model is `node_model`.
bool GpuModelMatches(std::string_view requested, std::string_view node_model);

// True when any of `requested` matches `node_model` (an empty list accepts every model).
bool AnyGpuModelMatches(const std::vector<std::string>& requested, std::string_view node_model);

}  // namespace tessera::model
