#include "deviceplugin/deviceplugin_command.h"

#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "agent/backend_flags.h"
#include "common/clock.h"
#include "deviceplugin/node_annotator.h"
#include "deviceplugin/plugin_manager.h"

namespace tessera::deviceplugin {
namespace {

// The Node annotator, or null when --node-name is empty or no API config can be had: the
// plugin's kubelet role does not depend on the API.
std::unique_ptr<NodeAnnotator> MakeAnnotator(const DevicePluginFlags& flags, Clock& clock) {
  if (flags.node_name.empty()) {
    if (!flags.kubeconfig.empty()) {
      std::cerr << "device-plugin: warning: --kubeconfig without --node-name (or $NODE_NAME): "
                   "not writing "
                << kNvlinkDomainsAnnotation << "\n";
    }
    return nullptr;
  }
  absl::StatusOr<std::shared_ptr<kube::RestClient>> client = NodeApiClient(flags.kubeconfig);
  if (!client.ok()) {
    std::cerr << "device-plugin: warning: "
              << (flags.kubeconfig.empty() ? "in-cluster config"
                                           : "--kubeconfig " + flags.kubeconfig)
              << ": " << client.status().message() << "; not writing " << kNvlinkDomainsAnnotation
              << " on node " << flags.node_name << "\n";
    return nullptr;
  }
  NodeAnnotatorOptions opts;
  opts.node_name = flags.node_name;
  return std::make_unique<NodeAnnotator>(KubeNodePatcher(*std::move(client), flags.node_name),
                                         clock, opts);
}

}  // namespace

int RunDevicePlugin(const DevicePluginFlags& flags) {
  absl::StatusOr<MigStrategy> strategy = ParseMigStrategy(flags.mig_strategy);
  if (!strategy.ok()) {
    std::cerr << "--mig-strategy: expected none or mixed, got '" << flags.mig_strategy << "'\n";
    return 2;
  }
  if (flags.metrics_interval <= absl::ZeroDuration()) {
    std::cerr << "--metrics-interval: must be positive\n";
    return 2;
  }
  if (flags.rescan_interval < absl::ZeroDuration()) {
    std::cerr << "--rescan-interval: must not be negative\n";
    return 2;
  }
  if (flags.cdi.has_value() && !flags.device_list_strategy.empty()) {
    std::cerr << "--cdi: not with --device-list-strategy (use --device-list-strategy "
                 "envvar,cdi-cri)\n";
    return 2;
  }
  std::vector<std::string> strategy_names = flags.device_list_strategy;
  if (strategy_names.empty()) strategy_names = {"envvar"};
  if (flags.cdi.value_or(false)) strategy_names.push_back("cdi-cri");
  absl::StatusOr<DeviceListStrategies> strategies = ParseDeviceListStrategies(strategy_names);
  if (!strategies.ok()) {
    std::cerr << "--device-list-strategy: " << strategies.status().message() << "\n";
    return 2;
  }
  if (flags.dev_root.empty() || flags.dev_root.front() != '/') {
    std::cerr << "--dev-root: expected an absolute path, got '" << flags.dev_root << "'\n";
    return 2;
  }
  // Block the stop signals before any thread exists (every later thread, the driver's included,
  // inherits the mask) and take them synchronously below, with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  RealClock clock;
  absl::StatusOr<std::unique_ptr<agent::GpuBackend>> chosen =
      agent::BackendFromFlags(flags.backend, flags.fake_config, flags.nvml_lib, clock);
  if (!chosen.ok()) {
    std::cerr << chosen.status().message() << "\n";
    return 2;
  }
  std::unique_ptr<agent::GpuBackend> backend = *std::move(chosen);
  if (absl::Status st = backend->Init(); !st.ok()) {
    std::cerr << "GPU backend " << flags.backend << ": " << st.message() << "\n";
    return 1;
  }

  PluginOptions options;
  options.plugin_dir = flags.plugin_dir;
  options.mig_strategy = *strategy;
  options.allocate.strategies = *strategies;
  options.allocate.dev_root = flags.dev_root;
  options.health.ignored_xids.insert(flags.ignore_xids.begin(), flags.ignore_xids.end());
  options.metrics_every = flags.metrics_interval;
  options.rescan_every = flags.rescan_interval;
  // Outlives the manager, which calls it from its threads.
  std::unique_ptr<NodeAnnotator> annotator = MakeAnnotator(flags, clock);
  if (annotator) {
    options.on_inventory = [a = annotator.get()](const agent::NodeSnapshot& node,
                                                 const std::vector<Resource>& resources) {
      a->Set(NvLinkDomainsOf(node, resources));
    };
    annotator->Start();
  }
  int code = 0;
  {
    DevicePluginManager manager(*backend, clock, options);
    if (absl::Status st = manager.Start(); !st.ok()) {
      std::cerr << "device-plugin: " << st.message() << "\n";
      code = 1;
    } else {
      int sig = 0;
      sigwait(&stop_signals, &sig);
      std::cerr << "device-plugin: signal " << sig << ", stopping\n";
      manager.Stop();
    }
  }
  if (annotator) annotator->Stop();
  backend->Shutdown().IgnoreError();
  return code;
}

void RegisterDevicePluginCommands(CLI::App& app) {
  auto flags = std::make_shared<DevicePluginFlags>();
  auto interval = std::make_shared<std::string>();
  auto rescan = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "device-plugin", "Kubernetes device plugin: advertise this node's GPUs to kubelet");
  cmd->add_option("--backend", flags->backend, "GPU backend: nvml or fake")
      ->check(CLI::IsMember({"nvml", "fake"}));
  cmd->add_option("--fake-config", flags->fake_config,
                  "YAML node description for --backend fake (see deploy/fake-gpus/)");
  cmd->add_option("--nvml-lib", flags->nvml_lib,
                  "NVML library to load (default: $TESSERA_NVML_LIB or libnvidia-ml.so.1)");
  cmd->add_option("--plugin-dir", flags->plugin_dir,
                  "kubelet's device plugin directory (kubelet.sock and the plugin sockets)");
  cmd->add_option("--mig-strategy", flags->mig_strategy,
                  "none: every GPU is nvidia.com/gpu; mixed: MIG instances of MIG-enabled GPUs "
                  "are nvidia.com/mig-<profile>")
      ->check(CLI::IsMember({"none", "mixed"}));
  cmd->add_option("--device-list-strategy", flags->device_list_strategy,
                  "How Allocate passes the devices, as NVIDIA's plugin: envvar "
                  "(NVIDIA_VISIBLE_DEVICES and device nodes; the default), cdi-annotations, "
                  "cdi-cri (CDI names nvidia.com/gpu=<UUID>); repeat or comma-separate")
      ->delimiter(',');
  cmd->add_option("--dev-root", flags->dev_root,
                  "Root under which the host's /dev/nvidia* nodes are (default /)");
  cmd->add_option("--cdi", flags->cdi,
                  "Deprecated: true is --device-list-strategy envvar,cdi-cri, false envvar");
  cmd->add_option("--ignore-xid", flags->ignore_xids, "XIDs that never affect health");
  cmd->add_option("--metrics-interval", *interval,
                  "How often metrics are read for health (temperature, ECC), e.g. 10s");
  cmd->add_option("--rescan-interval", *rescan,
                  "How often GPUs and MIG layout are rediscovered, e.g. 30s; 0 never");
  cmd->add_option("--node-name", flags->node_name,
                  "This node's Kubernetes name: write its NVLink islands onto the Node as "
                  "tessera.dev/nvlink-domains (empty: do not)")
      ->envname("NODE_NAME");
  cmd->add_option("--kubeconfig", flags->kubeconfig,
                  "kubeconfig for writing the Node annotation (default: the in-cluster config)");
  cmd->footer(
      "Examples:\n"
      "  tessera device-plugin                            # kubelet's "
      "/var/lib/kubelet/device-plugins\n"
      "  tessera device-plugin --mig-strategy mixed --device-list-strategy cdi-cri\n"
      "  tessera device-plugin --node-name gpu-1 --kubeconfig ~/.kube/config  # and annotate Node "
      "gpu-1");
  cmd->callback([flags, interval, rescan]() {
    if (!interval->empty() && !absl::ParseDuration(*interval, &flags->metrics_interval)) {
      throw CLI::ValidationError("--metrics-interval",
                                 "expected a duration such as 10s, got '" + *interval + "'");
    }
    if (!rescan->empty() && !absl::ParseDuration(*rescan, &flags->rescan_interval)) {
      throw CLI::ValidationError("--rescan-interval",
                                 "expected a duration such as 30s, got '" + *rescan + "'");
    }
    int code = RunDevicePlugin(*flags);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tessera::deviceplugin
