// `tessera device-plugin`: the Kubernetes device plugin for this node's GPUs.
//
//   tessera device-plugin [--backend nvml|fake] [--fake-config FILE] [--nvml-lib PATH]
//                         [--plugin-dir DIR] [--mig-strategy none|mixed]
//                         [--device-list-strategy envvar,cdi-annotations,cdi-cri] [--dev-root DIR]
//                         [--ignore-xid N ...] [--metrics-interval DURATION]
//                         [--rescan-interval DURATION] [--node-name NAME] [--kubeconfig FILE]
// (--cdi=true|false is the older spelling of --device-list-strategy envvar,cdi-cri | envvar.)
//
// Serves kubelet's device plugin API v1beta1 for nvidia.com/gpu (and, with MIG,
// nvidia.com/mig-<profile>) until SIGINT or SIGTERM, then stops within --metrics-interval (the
// health monitor finishes its event wait) and removes its sockets. With --node-name (default
// $NODE_NAME) it also writes the node's NVLink islands onto its Node (node_annotator.h), through
// --kubeconfig or the in-cluster config; without a usable config it warns and serves kubelet
// all the same. See docs/device-plugin.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace CLI {
class App;
}  // namespace CLI

namespace tessera::deviceplugin {

struct DevicePluginFlags {
  std::string backend = "nvml";
  std::string fake_config;
  std::string nvml_lib;
  std::string plugin_dir = "/var/lib/kubelet/device-plugins/";
  std::string mig_strategy = "mixed";
  std::vector<std::string> device_list_strategy;  // empty: NVIDIA's default, envvar
  std::optional<bool> cdi;                        // deprecated; not with device_list_strategy
  std::string dev_root = "/";
  std::vector<uint64_t> ignore_xids;
  absl::Duration metrics_interval = absl::Seconds(10);
  absl::Duration rescan_interval = absl::Seconds(30);  // 0: never rediscover
  std::string node_name;   // empty: no tessera.dev/nvlink-domains annotation
  std::string kubeconfig;  // empty: the in-cluster config
};

// Runs until SIGINT/SIGTERM; returns the exit code (0 clean stop, 1 failure, 2 bad usage).
int RunDevicePlugin(const DevicePluginFlags& flags);

// Adds `device-plugin` to the tessera binary.
void RegisterDevicePluginCommands(CLI::App& app);

}  // namespace tessera::deviceplugin
