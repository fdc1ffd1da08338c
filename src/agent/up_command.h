// `tessera up`: a whole cluster on this machine, for trying Tessera and for demos.
//
//   tessera up [--h100-nodes 4] [--pcie-nodes 2] [--listen 127.0.0.1:7420] [--data-dir DIR]
//              [--duration SECONDS] [--no-demo] [--examples DIR] [--fake-gpus DIR]
//
// Starts `tessera server` on the embedded store (a temporary data dir unless --data-dir), then one
// `tessera agent` per node with fake GPUs (deploy/fake-gpus/up-*.yaml: 8 x H100 on NVSwitch,
// 4 x A100 PCIe in NVLink pairs), waits for the nodes to be Ready, submits the demo workload (a
// 16-GPU gang TrainingJob whose members write checkpoints, two inference replicas, three small
// jobs; scripts in examples/), prints where every member was placed and where the API is, and
// runs until Ctrl-C (SIGINT/SIGTERM) or --duration. Stopping deletes the demo jobs (members get
// their checkpoint signal), stops the agents and the server, and kills any member left.
#pragma once

namespace CLI {
class App;
}  // namespace CLI

namespace tessera::agent {

void RegisterUpCommand(CLI::App& app);

}  // namespace tessera::agent
