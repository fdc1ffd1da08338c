// ControlPlaneClient: everything the node agent needs from `tessera server`, behind one small
// interface so the agent's logic is tested without HTTP and the wire format can change in one
// place (HttpControlPlaneClient, http_control_plane.h).
//
// Contract (what the agent relies on):
//  - RegisterNode is idempotent: it creates the Node object or updates its spec.
//  - Heartbeat replaces the node's GPU health and measured utilization and refreshes its
//    heartbeat time.
//  - ListBindings returns every member the server currently binds to this node, each with the
//    job's *current* fencing generation, and the server revision the list is valid at. A member
//    missing from the list (or listed with a newer generation than the one running) must not run
//    here. Its cost is O(this node's bindings), never O(all jobs).
//  - WatchBindings(since, timeout) is the same list once the node's bindings changed after
//    `since` (changed == false: `timeout` passed with nothing new); since 0 answers at once.
//  - ReportMembers writes the members' states into their jobs' status.members[] (and a serving
//    replica's metrics reading, when it has one, into status.replicaMetrics); the controller,
//    not the agent, derives the job's phase from them. A member no longer bound here is not
//    an error (its report is dropped).
// Errors: Unavailable for transport failures (the agent backs off and retries); other codes are
// answers from the server.
// Thread safety: implementations may be called from one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/member_status.h"

namespace tessera::agent {

struct NodeGpu {
  int index = 0;
  std::string uuid;
  std::string model;
  int64_t memory_mib = 0;
};

struct NodeRegistration {
  std::string name;
  int64_t cpu_milli = 0;  // what members may use; 0: not reported (the node is not limited)
  int64_t memory_mib = 0;
  std::vector<NodeGpu> gpus;
  // links[a][b] in nvidia-smi topo -m terms: X, NVSWITCH, NVLINK, PIX, PHB, SYS.
  std::vector<std::vector<std::string>> links;
  std::string rack;
  std::string block;
  std::map<std::string, std::string> labels;
  std::string agent_endpoint;  // "http://HOST:PORT" serving /metrics and /logs; may be empty
};

struct GpuHealthReport {
  int index = 0;
  bool healthy = true;
  std::string message;
  // Measured GPU utilization in percent (the sample behind DCGM_FI_DEV_GPU_UTIL); empty when the
  // backend cannot report it. Rides on the heartbeat's write, no extra request.
  std::optional<uint32_t> utilization_percent;
};

struct Binding {
  std::string kind = "TrainingJob";  // or InferenceService
  std::string namespace_name;
  std::string job;
  std::string group;
  int index = 0;
  int64_t generation = 0;
  std::vector<int> gpus;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  std::string working_dir;
  int checkpoint_signal = 10;  // SIGUSR1
  absl::Duration grace = absl::Seconds(30);
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  // The job is a preemption victim (its PreemptionPending condition is True):
  // its members get the checkpoint signal now, while still bound, so they can
  // save and exit before the deadline and hand their GPUs over early.
  bool checkpoint_requested = false;
};

// A serving replica's own reading of its latency and throughput: the JSON object it wrote to
// TESSERA_METRICS_PATH (docs/agent.md, "Replica metrics"), stamped with the file's write time.
struct ReplicaMetrics {
  std::optional<double> p99_latency_ms;
  std::optional<double> rps;
  absl::Time time;
};

// What became of one member bound to this node: its status.members[] entry (api/member_status.h).
struct MemberReport {
  std::string kind = "TrainingJob";
  std::string namespace_name;
  std::string job;
  std::string group;
  int index = 0;
  int64_t generation = 0;
  api::MemberState state = api::MemberState::kRunning;
  int exit_code = -1;   // Exited / Failed: the command's code, 128+N for signal N
  std::string reason;   // Exited / Failed: api::ExitReason
  std::string message;  // Failed: the last lines of its stderr
  std::optional<api::MemberCheckpoint> last_checkpoint;
  absl::Time time = absl::InfinitePast();  // when the agent saw the state
  // A running serving replica's latest reading, when it wrote a new one since the last report.
  std::optional<ReplicaMetrics> metrics;
};

// The bindings of one node at one server revision.
struct BindingSet {
  int64_t revision = 0;
  bool changed = true;  // false: nothing changed after `since`, `bindings` is empty
  std::vector<Binding> bindings;
};

class ControlPlaneClient {
 public:
  virtual ~ControlPlaneClient() = default;
  virtual absl::Status RegisterNode(const NodeRegistration& node) = 0;
  virtual absl::Status Heartbeat(const std::string& node, const std::vector<GpuHealthReport>& gpus,
                                 absl::Time now) = 0;
  virtual absl::StatusOr<BindingSet> ListBindings(const std::string& node) = 0;
  virtual absl::StatusOr<BindingSet> WatchBindings(const std::string& node, int64_t since,
                                                   absl::Duration timeout) = 0;
  virtual absl::Status ReportMembers(const std::string& node,
                                     const std::vector<MemberReport>& members) = 0;
};

}  // namespace tessera::agent
