#include "dra/dra_command.h"

#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <memory>
#include <set>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "agent/backend_flags.h"
#include "common/clock.h"
#include "deviceplugin/node_annotator.h"
#include "dra/driver.h"
#include "kube/informer.h"
#include "kube/resource.h"
#include "kube/rest_client.h"

namespace tessera::dra {

int RunDraDriver(const DraDriverFlags& flags) {
  if (flags.node_name.empty()) {
    std::cerr << "--node-name: required (or $NODE_NAME): the node's pool and ResourceSlice\n";
    return 2;
  }
  if (flags.metrics_interval <= absl::ZeroDuration()) {
    std::cerr << "--metrics-interval: must be positive\n";
    return 2;
  }
  if (flags.dev_root.empty() || flags.dev_root.front() != '/') {
    std::cerr << "--dev-root: expected an absolute path, got '" << flags.dev_root << "'\n";
    return 2;
  }
  if (flags.driver_name.empty()) {
    std::cerr << "--driver-name: must not be empty\n";
    return 2;
  }
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
  // The device plugin's client (short timeouts); the driver reads claims and writes slices.
  absl::StatusOr<std::shared_ptr<kube::RestClient>> client =
      deviceplugin::NodeApiClient(flags.kubeconfig);
  if (!client.ok()) {
    std::cerr << "dra-driver: "
              << (flags.kubeconfig.empty() ? "in-cluster config"
                                           : "--kubeconfig " + flags.kubeconfig)
              << ": " << client.status().message() << "\n";
    return 1;
  }
  if (absl::Status st = backend->Init(); !st.ok()) {
    std::cerr << "GPU backend " << flags.backend << ": " << st.message() << "\n";
    return 1;
  }
  DriverOptions options;
  options.driver = flags.driver_name;
  options.node_name = flags.node_name;
  options.plugin_dir =
      flags.plugin_dir.empty() ? "/var/lib/kubelet/plugins/" + flags.driver_name : flags.plugin_dir;
  options.registry_dir = flags.registry_dir;
  options.cdi_dir = flags.cdi_dir;
  options.dev_root = flags.dev_root;
  options.cleanup_on_exit = flags.cleanup_on_exit;
  options.health.ignored_xids.insert(flags.ignore_xids.begin(), flags.ignore_xids.end());
  options.metrics_every = flags.metrics_interval;
  int code = 0;
  {
    DraDriver driver(*backend, clock, KubeClaimGetter(*client), KubeSliceWriter(*client), options);
    if (absl::Status st = driver.Start(); !st.ok()) {
      std::cerr << "dra-driver: " << st.message() << "\n";
      code = 1;
    } else {
      // The node's slices, watched: one of ours deleted (kubelet wipes its node's slices when
      // it starts; an administrator) is written again at once.
      const std::set<std::string> ours = {SliceName(options.driver, options.node_name),
                                          CounterSliceName(options.driver, options.node_name)};
      auto ours_gone = [&] {
        std::cerr
            << "dra-driver: a ResourceSlice of this node is missing (deleted); writing it again\n";
        driver.Republish();
      };
      kube::ReflectorOptions ro;
      ro.type = kube::ResourceSlicesResource();
      ro.field_selector = "spec.nodeName=" + options.node_name;
      kube::Informer slices(**client, ro);
      slices.AddEventHandlers({nullptr, nullptr, [&](const kube::ObjectPtr& o) {
                                 if (ours.contains((*o)["metadata"].value("name", ""))) ours_gone();
                               }});
      slices.Start();
      if (slices.WaitForSync(absl::Seconds(30)) && slices.store().Get(*ours.begin()) == nullptr) {
        ours_gone();  // deleted before the watch began
      }
      int sig = 0;
      sigwait(&stop_signals, &sig);
      std::cerr << "dra-driver: signal " << sig << ", stopping\n";
      slices.Stop();
      driver.Stop();
    }
  }
  backend->Shutdown().IgnoreError();
  return code;
}

void RegisterDraCommands(CLI::App& app) {
  auto flags = std::make_shared<DraDriverFlags>();
  auto interval = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "dra-driver",
      "Kubernetes DRA driver: publish this node's GPUs as ResourceSlices, prepare claims (CDI)");
  cmd->add_option("--backend", flags->backend, "GPU backend: nvml or fake")
      ->check(CLI::IsMember({"nvml", "fake"}));
  cmd->add_option("--fake-config", flags->fake_config,
                  "YAML node description for --backend fake (see deploy/fake-gpus/)");
  cmd->add_option("--nvml-lib", flags->nvml_lib,
                  "NVML library to load (default: $TESSERA_NVML_LIB or libnvidia-ml.so.1)");
  cmd->add_option("--node-name", flags->node_name,
                  "This node's Kubernetes name: its pool and ResourceSlice (required)")
      ->envname("NODE_NAME");
  cmd->add_option("--kubeconfig", flags->kubeconfig,
                  "kubeconfig for the API (default: the in-cluster config)");
  cmd->add_option("--driver-name", flags->driver_name, "DRA driver name (default gpu.tessera.dev)");
  cmd->add_option("--plugin-dir", flags->plugin_dir,
                  "Directory of the DRA socket and the checkpoint (default "
                  "/var/lib/kubelet/plugins/<driver-name>)");
  cmd->add_option("--registry-dir", flags->registry_dir,
                  "kubelet's plugin registration directory (default "
                  "/var/lib/kubelet/plugins_registry)");
  cmd->add_option("--cdi-dir", flags->cdi_dir,
                  "Where CDI specs are written (default /var/run/cdi)");
  cmd->add_option("--dev-root", flags->dev_root,
                  "Root under which the host's /dev/nvidia* nodes are (default /)");
  cmd->add_option("--ignore-xid", flags->ignore_xids, "XIDs that never affect health");
  cmd->add_option("--metrics-interval", *interval,
                  "How often metrics are read for health (temperature, ECC), e.g. 10s");
  cmd->add_flag("--cleanup-on-exit", flags->cleanup_on_exit,
                "Delete the node's ResourceSlice on SIGINT/SIGTERM (the driver leaves for good)");
  cmd->callback([flags, interval]() {
    if (!interval->empty() && !absl::ParseDuration(*interval, &flags->metrics_interval)) {
      throw CLI::ValidationError("--metrics-interval",
                                 "expected a duration such as 10s, got '" + *interval + "'");
    }
    int code = RunDraDriver(*flags);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace tessera::dra
