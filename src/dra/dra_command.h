// `tessera dra-driver`: the Kubernetes Dynamic Resource Allocation driver for this node's GPUs
// (docs/dra.md).
//
//   tessera dra-driver --node-name NAME [--kubeconfig FILE] [--backend nvml|fake]
//                      [--fake-config FILE] [--nvml-lib PATH] [--driver-name gpu.tessera.dev]
//                      [--plugin-dir DIR] [--registry-dir DIR] [--cdi-dir DIR] [--dev-root DIR]
//                      [--ignore-xid N ...] [--metrics-interval DURATION] [--cleanup-on-exit]
//
// Serves kubelet's plugin registration and DRA API (v1, v1beta1), publishes the node's
// ResourceSlice and prepares claims into CDI specs (driver.h) until SIGINT or SIGTERM. Unlike the
// device plugin it needs the API (claims are read from it): without --node-name or a usable
// config it refuses to start.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace CLI {
class App;
}  // namespace CLI

namespace tessera::dra {

struct DraDriverFlags {
  std::string backend = "nvml";
  std::string fake_config;
  std::string nvml_lib;
  std::string node_name;
  std::string kubeconfig;  // empty: the in-cluster config
  std::string driver_name = "gpu.tessera.dev";
  std::string plugin_dir;  // empty: /var/lib/kubelet/plugins/<driver-name>
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";
  std::string cdi_dir = "/var/run/cdi";
  std::string dev_root = "/";
  std::vector<uint64_t> ignore_xids;
  absl::Duration metrics_interval = absl::Seconds(10);
  bool cleanup_on_exit = false;
};

// Runs until SIGINT/SIGTERM; returns the exit code (0 clean stop, 1 failure, 2 bad usage).
int RunDraDriver(const DraDriverFlags& flags);

// Adds `dra-driver` to the tessera binary.
void RegisterDraCommands(CLI::App& app);

}  // namespace tessera::dra
