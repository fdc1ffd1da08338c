// HttpControlPlaneClient: ControlPlaneClient over `tessera server`'s /api/v1 (docs/api.md).
//
// Wire format (docs/agent.md, "Agent <-> server"):
//  - Node NAME: spec {gpus[] {index, uuid, model, memoryMiB}, links[][], nvlinkDomains[], rack,
//    block, cpuMilli, memoryMiB}, metadata.annotations["tessera.dev/agent-endpoint"]; the server
//    keeps what an admin owns (taints, cordon, pool) and refuses more capacity than registered.
//  - Heartbeat: POST /api/v1/nodes/NAME/heartbeat {gpus[] {index, health, message,
//    utilization}}: renews the node's lease in the server's memory and writes the Node only on
//    a change or when its stored heartbeat is stale.
//  - Bindings: GET /api/v1/nodes/NAME/bindings[?resourceVersion=R&timeoutSeconds=S] (the
//    server's per-node index: TrainingJobs and InferenceServices in a bound phase whose
//    status.placement[] names this node: {group, member, node, gpus[], generation}). The command is
//    spec.command or the annotation tessera.dev/command (a JSON array); annotations tessera.dev/env
//    (JSON object), tessera.dev/working-dir, tessera.dev/checkpoint-signal (USR1, TERM, ... or a
//    number) and tessera.dev/grace-seconds (at most api::kMaxGraceSeconds) tune the member.
//    spec.checkpoint.path and status.resumeFrom.path reach the member as
//    TESSERA_CHECKPOINT_PATH / TESSERA_RESUME_FROM.
//  - Member reports: PUT .../NAME/status {"status": {"members": [{member, generation, state,
//    exitCode, reason, message, time}], "replicaMetrics": {...}}}, one per job; the server merges
//    the entries (only members bound to this node) and the controller derives the job's phase.
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
  // status.gpus[] for `gpus`.
  nlohmann::json GpuStatus(const std::vector<GpuHealthReport>& gpus) const;

  ApiClient api_;
};

// "SIGUSR1", "USR1", "10" -> 10; -1 when unknown.
int ParseSignal(const std::string& name);

}  // namespace tessera::agent
