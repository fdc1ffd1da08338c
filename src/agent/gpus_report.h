// Presents a NodeSnapshot to people (an aligned table, the topology matrix in nvidia-smi's
// `topo -m` style) and to programs (JSON). Pure functions.
#pragma once

#include <string>

#include "agent/discovery.h"
#include "nlohmann/json.hpp"

namespace tessera::agent {

std::string RenderSnapshotTable(const NodeSnapshot& snap);
nlohmann::json SnapshotToJson(const NodeSnapshot& snap);

}  // namespace tessera::agent
