// ApiServer: the control plane's HTTP/JSON API (/api/v1, Kubernetes-shaped
// objects) over a Store. See docs/api.md for the routes and semantics.
//
// Every object lives at one store key; its resourceVersion is the key's
// mod_revision, so optimistic concurrency (PUT with a stale resourceVersion ->
// 409) is the store's compare-and-swap, and watch is the store's event history
// (resumable from any resourceVersion still retained; 410 Gone otherwise).
// The server keeps no state of its own beyond the store: restarting it on the
// same store loses nothing that was acknowledged.
//
// Time: creationTimestamp comes from the injected Clock; network deadlines
// (watch timeouts, keep-alive heartbeats) are real time.
//
// Ownership: the server does not own the Store or the Clock; both must
// outlive it. Thread safety: Start/Stop from one thread; requests are served
// concurrently by the event-driven front end's workers (http/event_server.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "http/event_server.h"
#include "metrics/registry.h"
#include "nlohmann/json.hpp"
#include "server/auth.h"
#include "server/largest_node.h"
#include "server/node_bindings.h"
#include "server/request_metrics.h"
#include "server/resource_quota.h"
#include "server/slot_shares.h"
#include "server/table_rows.h"
#include "store/store.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace tessera::controller {
class NodeLeases;
}  // namespace tessera::controller

namespace tessera::api {
struct KindInfo;
}  // namespace tessera::api

namespace tessera::server {

using Json = nlohmann::json;
class ElasticPool;
class GpuSamples;

struct ApiServerOptions {
  size_t max_body_bytes = 1 << 20;  // larger bodies get 413
  // Worker threads that run requests (http/event_server.h): connections, idle keep-alives and
  // node-binding long-polls hold none; a request holds one while it runs (a durable write while
  // its fsync is shared with the others', group commit). Watches run on threads of their own,
  // at most max_watches.
  int threads = 16;
  // Threads that accept, read and write connections.
  int io_threads = 2;
  // Open connections beyond this are answered 503 and closed.
  int max_connections = 50000;
  // Open node binding long-polls (GET /api/v1/nodes/NAME/bindings?resourceVersion=R&
  // timeoutSeconds=S; one per node agent) beyond this get 429; so do those of a token that holds
  // max_binding_waits_per_token already (0: a quarter of max_binding_waits). slot_shares.h.
  int max_binding_waits = 20000;
  int max_binding_waits_per_token = 0;
  absl::Duration max_binding_wait = absl::Minutes(5);
  // A request whose headers or body stall this long gets 400 and changes
  // nothing, so a slow sender holds a request thread only this long.
  absl::Duration read_timeout = absl::Seconds(5);
  // However it trickles: a request's line and headers must arrive within header_timeout of its
  // first byte (and a TLS handshake within header_timeout of the connection), at most
  // max_header_bytes of them; its body within body_timeout of the headers. Past any, 400 and
  // the connection is closed (src/http/bounded_server.h).
  absl::Duration header_timeout = absl::Seconds(10);
  int64_t max_header_bytes = 64 << 10;
  absl::Duration body_timeout = absl::Seconds(60);
  absl::Duration max_watch = absl::Minutes(30);
  absl::Duration watch_heartbeat = absl::Seconds(10);  // idle watch keep-alive / bookmark
  // Open watches beyond this get 429 (each holds a thread while it streams). 0 = 64. A token
  // holding max_watches_per_token watches gets 429 for another, so that one tenant cannot hold
  // every slot (0: a quarter of max_watches).
  int max_watches = 0;
  int max_watches_per_token = 0;
  uint64_t uid_seed = 1;  // seeds metadata.uid generation
  // TLS: PEM certificate (chain) and private key files; both or neither.
  // Debian's cpp-httplib is built with CPPHTTPLIB_OPENSSL_SUPPORT, so this is
  // its SSLServer (OpenSSL).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Appended to GET /metrics (Prometheus text), e.g. the store's metrics.
  std::function<std::string()> extra_metrics;
  // Registers further routes (the dashboard, /api/v1/fleet) before the /api/v1
  // catch-all, so that they win over it. They do their own authentication.
  std::function<void(httplib::Server&)> extra_routes;
  // Checks beyond the schema that need other stored objects (the queue tree
  // stays valid), run before a create, update or delete of a kind is
  // written; `obj` is null for a delete. A non-OK status is answered 422
  // with its message (which names the field) and nothing is written.
  std::function<absl::Status(const std::string& kind, const std::string& name, const Json* obj)>
      admit;
  // Node heartbeats (POST /api/v1/nodes/NAME/heartbeat) renew these leases
  // (borrowed; shared with the controller) and write the Node only on a
  // change, when it is not Ready, or when its stored heartbeat is older than
  // node_status_interval, stretched by up to half of it per node (a fixed share of the node's
  // name hash): nodes registered together, as after a restart or a fleet's first start, would
  // otherwise all refresh their Node in the same seconds of every interval, a burst of fsynced
  // writes (12,500 in 10 s) that the heartbeats queue behind. Null: every heartbeat is written.
  controller::NodeLeases* node_leases = nullptr;
  absl::Duration node_status_interval = absl::Seconds(60);
  // Replicas on etcd (docs/control-plane.md, "Replicas"): when set and false (this replica does
  // not run the controller, whose lease table is another process's memory), a heartbeat that
  // changes nothing is still written once the stored lastHeartbeatTime is
  // standby_node_status_interval old, so that the leader hears, through the Node's store event,
  // nodes whose agents talk to this replica. Keep it well under the controller's node grace.
  std::function<bool()> is_leader;
  absl::Duration standby_node_status_interval = absl::Seconds(13);
  // Every heartbeat's utilization samples go here (borrowed; the dashboard
  // reads them), written or not. Null: only the stored Node has them.
  GpuSamples* gpu_samples = nullptr;
};

class ApiServer {
 public:
  ApiServer(store::Store& store, Clock& clock, Authenticator auth,
            const ApiServerOptions& options = {});
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port (port 0 picks a free port) and serves on background
  // threads. Returns the bound port.
  absl::StatusOr<int> Start(const std::string& host, int port);
  // Stops accepting, ends open watches, joins the threads. Idempotent.
  void Stop();
  // Blocks until Stop() is called from another thread (or a signal handler
  // thread).
  void Wait();

 private:
  struct Route;
  void Handle(const httplib::Request& req, httplib::Response& res);
  void HandleGet(const Principal& who, const Route& r, const httplib::Request& req,
                 httplib::Response& res);
  void HandleList(const Route& r, const httplib::Request& req, httplib::Response& res);
  void HandleWatch(const Principal& who, const Route& r, const httplib::Request& req,
                   httplib::Response& res);
  // The write verbs (api_server_write.cc). Creates and updates ignore the status they carry
  // (it is the control plane's); PUT .../status writes what status_write.h allows `who`.
  void HandleCreate(const Principal& who, const Route& r, const httplib::Request& req,
                    httplib::Response& res);
  // A node token's update of its own Node keeps what an admin owns (taints, cordon, pool) and
  // may not raise its capacity.
  void HandleUpdate(const Principal& who, const Route& r, const httplib::Request& req,
                    httplib::Response& res);
  void HandleUpdateStatus(const Principal& who, const Route& r, const httplib::Request& req,
                          httplib::Response& res);
  void HandleDelete(const Route& r, const httplib::Request& req, httplib::Response& res);
  // The InferenceServices of namespace `ns` serving ModelVersion `name`
  // (api::ServingInferenceServices): a DELETE of a served one is refused with 409.
  absl::StatusOr<std::vector<std::string>> ServingModelVersion(const std::string& ns,
                                                               const std::string& name);
  void HandleBatch(const Principal& p, const httplib::Request& req, httplib::Response& res);
  // Adds to `errors` the fields of `obj` asking more GPUs per member than the fleet's largest
  // node has (largest_node.h), prefixed by `path`. On a store error answers `res` and returns
  // false.
  bool FitsTheFleet(const api::KindInfo& kind, const Json& obj, std::string_view path,
                    std::vector<api::FieldError>& errors, httplib::Response& res);
  // Runs options_.admit; on refusal answers `res` and returns false.
  bool Admit(const api::KindInfo& kind, const std::string& name, const Json* obj,
             httplib::Response& res);
  // Sends a deferred route's answer, counted as the other routes' answers are (responses by
  // status class, the request metrics). Copyable; called once, from any thread.
  using Finish = std::function<void(httplib::Response&)>;
  // A deferred route of the front end over node NAME (.../nodes/NAME/...): authenticates and
  // checks NAME (answering 401 / 400 itself), then runs `serve`.
  void ServeNodeRoute(
      const httplib::Request& req, const std::shared_ptr<http::Responder>& responder,
      const std::function<void(const Principal&, const std::string& node, const Finish&)>& serve);
  // Observes a request's status and latency since `start` in the request metrics.
  void ObserveRequest(const httplib::Request& req, int status, absl::Time start);
  // GET /api/v1/nodes/NAME/utilization: the node's per-GPU, per-minute utilization of the last
  // hour (GpuSamples::History), for the dashboard's sparklines. Whoever may read the Node.
  void HandleNodeUtilization(const Principal& who, const std::string& node, httplib::Response& res);
  // GET /api/v1/nodes/NAME/bindings: the jobs bound to one node, from the NodeBindingIndex
  // (api_server_wait.cc). A deferred route of the front end: a long-poll waits parked, holding
  // no thread, until the index reports a change for the node or its deadline passes.
  void ServeNodeBindings(const Principal& p, const std::string& node, const httplib::Request& req,
                         const std::shared_ptr<http::Responder>& responder, const Finish& finish);
  struct BindingsWait {
    int64_t since = 0;
    absl::Time deadline = absl::InfinitePast();  // past: answer at once
    std::shared_ptr<SlotShares::Slot> slot;      // held while the request waits
  };
  // Checks a bindings request; nullopt when `res` was answered (refused) already.
  std::optional<BindingsWait> StartNodeBindings(const Principal& p, const std::string& node,
                                                const httplib::Request& req,
                                                httplib::Response& res);
  // Answers from the index's snapshot, reading each bound job.
  void AnswerNodeBindings(const std::string& node, const NodeBindingIndex::Snapshot& snap,
                          httplib::Response& res);
  // POST /api/v1/nodes/NAME/heartbeat (node_heartbeat.cc), a deferred route of the front end:
  // lease renewals are answered on the worker; the heartbeats that write go to writers_, so that
  // a slow fsync never holds every worker (and with them every renewal) behind it.
  void ServeNodeHeartbeat(const Principal& p, const std::string& node, const httplib::Request& req,
                          const Finish& finish);
  // The Node as a heartbeat writes it, compare-and-swap on the revision it was read at.
  struct HeartbeatWrite {
    std::string key;
    std::string value;
    int64_t base = 0;
  };
  // Checks the heartbeat, renews the lease and (report_samples) reports the samples; answers
  // `res` unless the Node must be written (a change, a stale stored heartbeat): that write is
  // returned, unanswered, for WriteNodeHeartbeat.
  std::optional<HeartbeatWrite> PrepareNodeHeartbeat(const Principal& p, const std::string& node,
                                                     const httplib::Request& req,
                                                     httplib::Response& res, bool report_samples);
  // Writes it and answers; when the controller wrote the Node since it was read, prepares the
  // heartbeat again from a fresh read (up to 10 times).
  void WriteNodeHeartbeat(const Principal& p, const std::string& node, const httplib::Request& req,
                          HeartbeatWrite w, httplib::Response& res);
  // GET /api/v1/nodes/NAME/heartbeat: the node's lease (its last heartbeat).
  void HandleNodeLease(const Principal& p, const std::string& node, httplib::Response& res);
  std::string NewUid();

  store::Store& store_;
  Clock& clock_;
  const Authenticator auth_;
  const ApiServerOptions options_;
  absl::Status tls_error_;  // why the TLS files were refused (tls_policy.h); before http_
  std::unique_ptr<http::EventServer> http_;
  std::unique_ptr<ElasticPool> streams_;  // watch streams' threads
  std::unique_ptr<ElasticPool> writers_;  // heartbeats that write the Node
  std::atomic<bool> stopping_{false};
  SlotShares watches_;                          // open watch streams, shared fairly between tokens
  SlotShares binding_waits_;                    // open node-binding long-polls, likewise
  std::atomic<int64_t> heartbeats_written_{0};  // node heartbeats that wrote the Node
  std::atomic<int64_t> heartbeats_renewed_{0};  // ... that only renewed its lease
  std::unique_ptr<NodeBindingIndex> bindings_;
  QuotaGate quotas_{store_};                // ResourceQuota on creates (resource_quota.h)
  LargestNode largest_node_{store_};        // GPUs per member within the fleet (largest_node.h)
  TableRows table_rows_;                    // lists asked for as Tables (table_rows.h)
  std::atomic<int64_t> responses_[6] = {};  // by status class: [2] = 2xx, ...
  metrics::Registry request_registry_;      // API request rate and latency, in /metrics
  ApiRequestMetrics request_metrics_{request_registry_};
  // Connections closed by a limit of bounded_server.h, by reason (http_'s connections count
  // into it; they run only between Start and Stop).
  metrics::Family<metrics::Counter>* cuts_ = &request_registry_.AddCounter(
      "tessera_api_connections_cut_total",
      "API connections closed because a request broke a limit (header or body deadline, size).",
      {"reason"});
  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  // What a heartbeat compares with a stored Node, kept per node for the revision it was parsed
  // from: a renewal (most heartbeats) then reads the Node's revision but parses nothing. At
  // 12,500 agents, parsing each heartbeat's stored Node was 7 % of the server's CPU. An entry of
  // an older revision is parsed again; one per node ever heard (a few hundred bytes each).
  struct StoredNodeStatus {
    int64_t revision = 0;
    int64_t gpu_count = 0;
    absl::Time last_heartbeat = absl::InfinitePast();  // missing or unreadable: InfinitePast
    bool has_gpus = false;                             // status.gpus is there
    // status.gpus without the utilization samples, sorted by index, serialized: a string takes a
    // fraction of the memory of the parsed array.
    std::string gpus;
  };
  absl::Mutex node_status_mu_;
  std::map<std::string, StoredNodeStatus, std::less<>> node_status_
      ABSL_GUARDED_BY(node_status_mu_);
};

}  // namespace tessera::server
