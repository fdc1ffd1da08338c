// SimAgents: N simulated node agents driven by one epoll thread (no thread per agent), speaking
// the real agent's protocol with their node tokens (docs/agent.md, "Agent <-> server"):
//   register   POST /api/v1/nodes, the Node and its GPUs
//   heartbeat  POST /api/v1/nodes/NAME/heartbeat every `heartbeat` (phases spread at random), on
//              a fresh connection, as the real agent's idle keep-alive is closed by the server
//   bindings   one long-poll per agent, GET /api/v1/nodes/NAME/bindings?resourceVersion=R&
//              timeoutSeconds=S, re-issued at once on the same connection
//   report     every member newly bound to the node at its job's generation is acknowledged by
//              reporting it Running: PUT /api/v1/namespaces/NS/trainingjobs/NAME/status with
//              status.members[] (api/member_status.h), one write per job and node, as
//              HttpControlPlaneClient::ReportMembers does; retried on 409 / 429 / 5xx.
// Reports share a bounded pool of keep-alive connections (each request carries its own node's
// token), so 12,500 agents hold 12,500 long-polls plus the pool, not twice as many sockets.
//
// The agents also check what they are told: each answer of a node's long-poll is its whole set of
// bindings, and a GPU of the node named by two of them is counted as double-booked.
//
// Thread safety: Start, WaitRegistered and Stop from one thread; the loop's results (stats(),
// JobReports()) are read after Stop().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tessera::bench {

struct SimAgentsOptions {
  int port = 0;  // the server's, on 127.0.0.1
  int nodes = 0;
  int gpus_per_node = 8;
  std::vector<std::string> tokens;               // node i's bearer token (nodes entries)
  absl::Duration heartbeat = absl::Seconds(10);  // zero: no heartbeats
  int poll_timeout_s = 30;
  int register_concurrency = 64;
  int report_connections = 64;
};

struct SimAgentsStats {
  int64_t registered = 0, register_errors = 0;
  int64_t polls = 0, poll_errors = 0;
  int64_t members_seen = 0;  // member bindings first seen by their node's agent
  int64_t reports = 0, reports_ok = 0, report_retries = 0, report_errors = 0;
  int64_t heartbeats = 0, heartbeat_errors = 0;
  int64_t nodes_double_booked = 0;  // nodes whose agent was shown one GPU in two bindings
};

// When a job's members reached their agents and when their reports were accepted.
struct JobReports {
  int members = 0;           // placement size, from the bindings
  int members_reported = 0;  // reports accepted (200)
  absl::Time first_seen = absl::InfiniteFuture();
  // A TrainingJob turns Running on its first member's report (docs/control-plane.md, "Member
  // status"), so that is the report the controller's reaction is timed from.
  absl::Time first_reported = absl::InfiniteFuture();
};

class SimAgents {
 public:
  // The simulated node `i`'s name.
  static std::string NodeName(int i);

  explicit SimAgents(SimAgentsOptions options);
  ~SimAgents();
  SimAgents(const SimAgents&) = delete;
  SimAgents& operator=(const SimAgents&) = delete;

  // Starts the loop thread: it registers every node, then keeps their long-polls, heartbeats and
  // reports going until Stop().
  void Start();
  // OK once every node is registered; Unavailable when one could not be, or after `timeout`.
  absl::Status WaitRegistered(absl::Duration timeout);
  // Stops the loop and closes its connections; idempotent.
  void Stop();

  // Valid after Stop().
  const SimAgentsStats& stats() const { return stats_; }
  // By job name; valid after Stop().
  const absl::flat_hash_map<std::string, JobReports>& job_reports() const { return jobs_; }

 private:
  struct Conn;
  struct Report;
  void Loop();
  Conn* Open(int kind, int agent, std::string request);
  void Send(Conn* c, std::string request);
  void Flush(Conn* c);
  void Close(Conn* c);
  void OnEvent(Conn* c, uint32_t events);
  // Returns false when it closed `c`.
  bool OnResponse(Conn* c, int code, const std::string& body);
  void OnBindings(int agent, const std::string& body);
  void StartWatch(int agent);
  void StartHeartbeat(int agent);
  void DispatchReports();
  void RetryReport(Report r);

  const SimAgentsOptions o_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool registration_over_ = false;  // guarded by mu_
  bool registered_all_ = false;     // guarded by mu_

  // Loop thread only.
  int ep_ = -1;
  SimAgentsStats stats_;
  absl::flat_hash_map<std::string, JobReports> jobs_;
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tessera::bench
