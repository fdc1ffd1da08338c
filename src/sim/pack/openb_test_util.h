// Test helpers: the shared openb trace folder and its `default` workload.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/pack/pack_sim.h"
#include "trace/openb.h"

namespace tessera::sim::pack {

// The openb folder under TESSERA_SHARED_DIR, or "" when it is absent.
inline std::string OpenbDir() {
  const char* shared = std::getenv("TESSERA_SHARED_DIR");
  std::string dir = shared ? std::string(shared) + "/traces/alibaba-gpu-v2023" : "";
  if (dir.empty() || !std::filesystem::exists(dir + "/csv/openb_pod_list_default.csv")) return "";
  return dir;
}
inline constexpr char kNoTrace[] =
    "openb trace not found: set TESSERA_SHARED_DIR to the folder holding "
    "traces/alibaba-gpu-v2023";

// The openb cluster and the `default` pod list.
inline void LoadDefault(const std::string& dir, std::vector<model::Node>* nodes, PackTrace* t) {
  auto node_rows = trace::LoadOpenbNodes(dir + "/csv/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(node_rows.ok()) << node_rows.status();
  ASSERT_EQ(node_rows->size(), 1213u);
  for (const auto& n : *node_rows) nodes->push_back(trace::ToNode(n));
  auto pods = trace::LoadOpenbPods(dir + "/csv/openb_pod_list_default.csv");
  ASSERT_TRUE(pods.ok()) << pods.status();
  ASSERT_EQ(pods->size(), 8152u);
  *t = PackTrace{"default", std::move(*pods)};
}

}  // namespace tessera::sim::pack
