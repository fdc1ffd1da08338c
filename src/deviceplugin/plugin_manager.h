// DevicePluginManager: the running device plugin of one node.
//
// Start(): discovers the GPUs (agent::Discover), builds the resources (inventory.h), keeps a
// HealthTracker (the agent's health logic) current with the agent's HealthMonitor (backend
// events, periodic metrics, loss by query) on a thread of its own, and for each resource serves
// a ResourceServer on
// <plugin_dir>/<socket_name> and then registers it with kubelet (serve first, then register).
// Every health transition, recovery included, refreshes the servers, which resend ListAndWatch.
// A watcher re-serves every resource on a fresh socket and registers again whenever kubelet.sock
// is (re)created, which is what a kubelet restart does after deleting all sockets. A failed
// registration (kubelet refused it, did not answer, or is not up yet) is logged and retried on a
// timer on `clock`: after `register_retry_initial`, then doubling up to `register_retry_max`,
// until kubelet accepts it (NVIDIA's plugin retries every 30 s); kubelet.sock's creation also
// registers again at once and starts the backoff over.
// Every `rescan_every` the GPUs are discovered again, so a MIG reconfiguration needs no restart:
// a resource whose devices changed is served anew on its socket and registered again, a new
// resource is served and registered, and a resource that vanished stops serving (kubelet then
// marks its devices unhealthy and drops them). Unchanged resources are left alone.
// The backend must be initialized and stays owned by the caller; the manager never shuts it down.
// Start runs once per manager. Stop() returns after the monitor's event wait in progress, so
// within `metrics_every` of clock time.
// Thread safety: Start and Stop from one thread; health() and the accessors are safe from any
// thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/discovery.h"
#include "agent/gpu_backend.h"
#include "agent/health.h"
#include "agent/health_monitor.h"
#include "common/clock.h"
#include "deviceplugin/allocate.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/kubelet_watcher.h"
#include "deviceplugin/plugin_server.h"

namespace tessera::deviceplugin {

struct PluginOptions {
  std::string plugin_dir = "/var/lib/kubelet/device-plugins/";
  MigStrategy mig_strategy = MigStrategy::kMixed;
  AllocateOptions allocate;
  agent::HealthPolicy health;
  absl::Duration metrics_every = absl::Seconds(10);  // health sampling of metrics (clock time)
  absl::Duration rescan_every = absl::Seconds(30);   // rediscovery (clock time); 0: never
  absl::Duration wait_failure_backoff = absl::Seconds(1);    // after a failed event wait
  absl::Duration register_timeout = absl::Seconds(5);        // real time
  absl::Duration register_retry_initial = absl::Seconds(1);  // clock time
  absl::Duration register_retry_max = absl::Seconds(30);
  // Diagnostics, one line per call, from any thread (must be thread-safe); default: stderr.
  std::function<void(absl::string_view)> log;
  // Each discovery's node and the resources built from it: at Start and at every rescan that
  // succeeds, changed or not; from Start's thread, then the event thread. Must not block (the
  // node annotator only records the value; its own thread talks to the API).
  std::function<void(const agent::NodeSnapshot&, const std::vector<Resource>&)> on_inventory;
};

class DevicePluginManager {
 public:
  // `backend` and `clock` must outlive the manager.
  DevicePluginManager(agent::GpuBackend& backend, Clock& clock, PluginOptions options);
  ~DevicePluginManager();

  DevicePluginManager(const DevicePluginManager&) = delete;
  DevicePluginManager& operator=(const DevicePluginManager&) = delete;

  // Fails when discovery fails, the directory cannot be watched or a socket cannot be served.
  absl::Status Start();
  void Stop();  // idempotent

  agent::HealthTracker& health() { return health_; }
  // The resources served now.
  std::vector<Resource> resources() const;
  std::string SocketPath(const Resource& resource) const;
  // Successful registrations so far (all resources).
  int registrations() const { return registrations_.load(); }

 private:
  std::unique_ptr<ResourceServer> MakeServer(const Resource& resource,
                                             const agent::TopologyMatrix& topology);
  // Serves (again) every resource and registers it.
  void ServeAndRegisterAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(lifecycle_mu_);
  // Registers one served resource; a failure is logged and scheduled for a retry.
  void RegisterOne(const ResourceServer& server);
  // The earliest registration retry due, if any.
  std::optional<absl::Time> NextRegisterRetry() const;
  // Registers again every resource whose retry is due. Event thread only.
  void RetryDueRegistrations();
  // Discovers again and applies a changed inventory; returns the GPU UUIDs by index.
  // Event thread only.
  std::vector<std::string> Rescan();
  void RefreshAll();
  void EventLoop(absl::Time start);
  void Log(absl::string_view line) const;

  agent::GpuBackend& backend_;
  Clock& clock_;
  const PluginOptions options_;
  agent::HealthTracker health_;
  std::vector<std::string> gpu_uuids_;  // by index; written by Start, then the event thread
  std::unique_ptr<FileCreationWatcher> watcher_;
  std::thread events_;
  std::atomic<bool> stop_{false};
  std::atomic<int> registrations_{0};

  // Lifecycle (start, stop, re-serve, rescan) is serialized by lifecycle_mu_; changing the set
  // of servers takes servers_mu_ too, which alone suffices to read it (health listener).
  // Order: lifecycle_mu_, then servers_mu_.
  absl::Mutex lifecycle_mu_;
  bool started_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  mutable absl::Mutex servers_mu_;
  // The event thread's monitor, so that Stop() can interrupt it.
  absl::Mutex monitor_mu_;
  agent::HealthMonitor* monitor_ ABSL_GUARDED_BY(monitor_mu_) = nullptr;
  std::vector<std::unique_ptr<ResourceServer>> servers_ ABSL_GUARDED_BY(servers_mu_);
  // Registrations to retry, by resource name: the backoff used last and when the retry is due.
  // A leaf lock.
  struct RegisterRetry {
    absl::Duration backoff;
    absl::Time due;
  };
  mutable absl::Mutex retry_mu_;
  std::map<std::string, RegisterRetry> retries_ ABSL_GUARDED_BY(retry_mu_);
};

}  // namespace tessera::deviceplugin
