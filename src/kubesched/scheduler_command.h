// `tessera scheduler --kubeconfig FILE`: the scheduling core as a Kubernetes scheduler for Pods
// whose spec.schedulerName is `tessera` (kube_scheduler.h), leader-elected on a Lease, with
// Prometheus metrics. docs/kubernetes.md describes it.
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::kubesched {

void RegisterSchedulerCommand(CLI::App& app);

}  // namespace tessera::kubesched
