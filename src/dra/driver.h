// DraDriver: `tessera dra-driver` on one node, the parts wired together.
//
// Start(): discovers the GPUs (agent::Discover) and builds the DRA devices (devices.h); loads
// the prepared claims' checkpoint (a corrupted one is reported and the driver starts anyway:
// kubelet prepares the claims again); serves kubelet (kubelet_server.h); starts publishing the
// node's ResourceSlice; and keeps a HealthTracker (the agent's XID classes) current with the
// agent's HealthMonitor on a thread of its own. Every health transition recomputes the slice:
// the devices of an unhealthy GPU leave it and come back when the GPU recovers; each change bumps
// the pool's generation. The slice is written by deviceplugin::NodeAnnotator (the device plugin's
// writer of desired state: its own thread, retries with backoff, a resync every 10 minutes that
// restores a slice deleted by hand), so kubelet's calls never wait on the API.
// Stop(): stops serving and monitoring; with `cleanup_on_exit` deletes the slice (once, with
// the client's timeout; a failure is logged), otherwise leaves it for the next run (a restart
// does not flap the node's devices).
// The backend must be initialized and stays the caller's. Thread safety: Start and Stop from one
// thread; health() and the accessors from any.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/gpu_backend.h"
#include "agent/health.h"
#include "agent/health_monitor.h"
#include "common/clock.h"
#include "deviceplugin/node_annotator.h"
#include "dra/kubelet_server.h"
#include "dra/preparer.h"

namespace tessera::kube {
class RestClient;
}  // namespace tessera::kube

namespace tessera::dra {

// Creates or replaces the ResourceSlice `slice`, or, with null, deletes slice `name` (one that
// is already gone is fine).
using SliceWriter = std::function<absl::Status(const std::string& name, const kube::Json* slice)>;

// Through the API (resource.k8s.io/v1): a Get, then a Create or an Update carrying the
// resourceVersion read. FailedPrecondition when the slice has spec.sharedCounters and the API
// server's answer does not (DRAPartitionableDevices off: it drops the field).
SliceWriter KubeSliceWriter(std::shared_ptr<kube::RestClient> client);
// Gets ResourceClaims through the API.
ClaimGetter KubeClaimGetter(std::shared_ptr<kube::RestClient> client);

struct DriverOptions {
  std::string driver = kDefaultDriverName;
  std::string node_name;
  std::string plugin_dir = "/var/lib/kubelet/plugins/gpu.tessera.dev";
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";
  std::string cdi_dir = "/var/run/cdi";
  std::string dev_root = "/";
  std::string checkpoint_path;  // empty: <plugin_dir>/checkpoint.json
  bool cleanup_on_exit = false;
  agent::HealthPolicy health;
  absl::Duration metrics_every = absl::Seconds(10);
  absl::Duration wait_failure_backoff = absl::Seconds(1);
  deviceplugin::NodeAnnotatorOptions publish;  // retry and resync of the slice
  std::function<void(absl::string_view)> log;  // default stderr, "dra-driver: " first
};

class DraDriver {
 public:
  // `backend` and `clock` must outlive the driver. Null `get` or `write`: no API (claims cannot
  // be prepared; no slice is published).
  DraDriver(agent::GpuBackend& backend, Clock& clock, ClaimGetter get, SliceWriter write,
            DriverOptions options);
  ~DraDriver();
  DraDriver(const DraDriver&) = delete;
  DraDriver& operator=(const DraDriver&) = delete;

  // Fails when discovery fails or a socket cannot be served. Runs once.
  absl::Status Start();
  void Stop();  // idempotent

  agent::HealthTracker& health() { return health_; }
  const std::vector<DraDevice>& devices() const { return devices_; }
  // Valid after Start.
  ClaimPreparer& preparer() { return *preparer_; }
  KubeletServer& server() { return *server_; }
  // The checkpoint's load at Start: OK, or DataLoss when it was corrupted.
  absl::Status checkpoint_status() const { return checkpoint_status_; }
  // Writes the slices again (someone deleted them: kubelet wipes a node's ResourceSlices when it
  // starts, and the driver republishes when kubelet registers it). Thread-safe; no-op without
  // a writer or before Start.
  void Republish();
  // The devices' slice wanted now (after the last health change).
  kube::Json slice() const;
  // Every slice wanted now: the devices' and, when partitionable devices are published, the
  // counter sets' (devices.h).
  std::vector<kube::Json> slices() const;

 private:
  void Publish();
  // The publisher's write of `value` (a JSON array of slices; "" deletes them).
  absl::Status WriteSlices(const std::string& value);
  void Log(absl::string_view line) const;

  agent::GpuBackend& backend_;
  Clock& clock_;
  const ClaimGetter get_;
  const SliceWriter write_;
  DriverOptions options_;
  agent::HealthTracker health_;
  std::vector<DraDevice> devices_;
  std::unique_ptr<ClaimPreparer> preparer_;
  std::unique_ptr<KubeletServer> server_;
  std::unique_ptr<deviceplugin::NodeAnnotator> publisher_;
  absl::Status checkpoint_status_;
  std::thread monitor_thread_;
  bool started_ = false;

  mutable absl::Mutex mu_;
  agent::HealthMonitor* monitor_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<kube::Json> slices_ ABSL_GUARDED_BY(mu_);
  std::string published_devices_ ABSL_GUARDED_BY(mu_);  // the device names of slices_
  // Whether whole MIG GPUs and counter sets are published: until the API server drops
  // sharedCounters.
  bool partitionable_ ABSL_GUARDED_BY(mu_) = true;
  // Whether the counter slice may exist (a previous run's, or ours): deleted when not wanted.
  bool counters_may_exist_ = true;  // the publisher's thread only
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::dra
