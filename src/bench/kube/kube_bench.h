// `tessera bench kube`: Tessera's Kubernetes scheduler (kubesched::KubeScheduler, in process) and
// the bed's kube-scheduler (a child process), each on a fresh etcd + kube-apiserver (KubeBed), on
// the same Nodes and Pods; and the apiserver's raw binding rate. Prints one JSON object
// (docs/kubernetes.md, "Benchmark: tessera vs kube-scheduler").
#pragma once

#include "CLI/CLI.hpp"

namespace tessera::bench {

// Adds `bench kube` under `bench` (the `tessera bench` parent command, src/main).
void RegisterKubeBenchCommand(CLI::App& bench);

}  // namespace tessera::bench
