// HttpControlPlaneClient: ControlPlaneClient over `tessera server`'s /api/v1 (docs/api.md).
//
// Wire format (docs/agent.md, "Agent <-> server"):
//  - Node NAME: spec {gpus[] {index, uuid, model, memoryMiB}, links[][], rack, block},
//    metadata.annotations["tessera.dev/agent-endpoint"]; status {lastHeartbeatTime,
//    gpus[] {index, health Healthy|Unhealthy, message}} (the controller owns status.phase). A
//    server whose Node schema predates these fields (422) gets {gpuType, gpuCount, topology
//    {rack, block}} and the heartbeat in status.observed instead; the client remembers which one
//    worked.
//  - Heartbeat: POST /api/v1/nodes/NAME/heartbeat {gpus[] {index, health, message,
//    utilization}}: renews the node's lease in the server's memory and writes the Node only on
//    a change or when its stored heartbeat is stale. A server without the route (404 "no such
//    path") gets the older GET + PUT of the Node's status, every time.
//  - Bindings: GET /api/v1/nodes/NAME/bindings[?resourceVersion=R&timeoutSeconds=S] (the
//    server's per-node index: TrainingJobs and InferenceServices in a bound phase whose
//    status.placement[] names this node: {group, member, node, gpus[], generation}). The command is
//    spec.command or the annotation tessera.dev/command (a JSON array); annotations tessera.dev/env
//    (JSON object), tessera.dev/working-dir, tessera.dev/checkpoint-signal (USR1, TERM, ... or a
//    number) and tessera.dev/grace-seconds tune the member. spec.checkpoint.path and
//    status.resumeFrom.path reach the member as TESSERA_CHECKPOINT_PATH / TESSERA_RESUME_FROM.
//  - Member reports: status.observed["<group>-<index>"] = "Running gen=G node=N" or
//    "Exited code=C gen=G node=N"; the phase moves Scheduled -> Running when a member runs,
//    -> Failed when a member of the current generation exits non-zero, -> Succeeded when every
//    placed member of the current generation exited 0. Writes use the resourceVersion (CAS) and
//    retry on conflict.
// Thread safety: one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/api_client.h"
#include "agent/control_plane.h"

namespace tessera::agent {

class HttpControlPlaneClient final : public ControlPlaneClient {
 public:
  // `timeout`: per request (a long-poll needs its wait plus this).
  HttpControlPlaneClient(const std::string& server, const std::string& token,
                         absl::Duration timeout = absl::Seconds(10),
                         const TlsClientOptions& tls = {});

  absl::Status RegisterNode(const NodeRegistration& node) override;
  absl::Status Heartbeat(const std::string& node, const std::vector<GpuHealthReport>& gpus,
                         absl::Time now) override;
  absl::StatusOr<BindingSet> ListBindings(const std::string& node) override;
  absl::StatusOr<BindingSet> WatchBindings(const std::string& node, int64_t since,
                                           absl::Duration timeout) override;
  absl::Status ReportMembers(const std::string& node,
                             const std::vector<MemberReport>& members) override;
  // Aborts the request in flight (a long WatchBindings), from any thread.
  void Cancel() { api_.Cancel(); }

 private:
  // The heartbeat as a GET and a PUT of the whole Node (servers before the heartbeat route).
  absl::Status PutHeartbeat(const std::string& node, const std::vector<GpuHealthReport>& gpus,
                            absl::Time now);
  // status.gpus[] for `gpus`.
  nlohmann::json GpuStatus(const std::vector<GpuHealthReport>& gpus) const;

  ApiClient api_;
  bool legacy_node_schema_ = false;
  bool no_heartbeat_route_ = false;
  // Set once a server rejected status.gpus[].utilization (older schema): heartbeats omit it.
  bool no_utilization_field_ = false;
};

// "SIGUSR1", "USR1", "10" -> 10; -1 when unknown.
int ParseSignal(const std::string& name);

}  // namespace tessera::agent
