// `tessera agent`: the node agent process, and `tessera logs`: a job's member logs.
//
//   tessera agent --server URL --token T --node-name N [--backend nvml|fake --fake-config FILE]
//                 [--state-dir DIR] [--metrics-listen 127.0.0.1:PORT] [--rack R --block B]
//                 [--heartbeat 10s] [--sync 2s] [--label k=v ...] [--ignore-xid N,...]
//   tessera logs JOB [-n NAMESPACE] [-f] [--server URL --token T] [--member GROUP-INDEX]
//
// The agent's HTTP endpoint (--metrics-listen) serves GET /metrics (DCGM-compatible text with
// the namespace and job of each GPU's workload), GET /members (JSON), GET /logs?namespace=&job=
// [&member=][&stream=stdout|stderr][&follow=1], GET /healthz, and with the fake backend only
// POST /fake/event?gpu=N&type=xid&xid=79 (or type=reset) to inject a GPU event (tests, demos).
// `tessera logs` finds the job's nodes in status.placement and each node's agent endpoint in the
// Node annotation tessera.dev/agent-endpoint, then streams from those agents.
#pragma once

namespace CLI {
class App;
}  // namespace CLI

namespace tessera::agent {

// Adds `agent` and `logs` to the tessera binary.
void RegisterNodeCommands(CLI::App& app);

}  // namespace tessera::agent
