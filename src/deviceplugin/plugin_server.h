// ResourceServer: the v1beta1.DevicePlugin gRPC service for one resource on one Unix socket.
//
// Health comes from a HealthFn (the HealthTracker's verdicts); Refresh() re-reads it and, when
// any device's health changed, queues the new full list for every open ListAndWatch stream, so
// kubelet sees every intermediate state in order (an XID and a later recovery are two updates).
// Each stream first receives the current list.
// Start() may follow Stop() (kubelet restarts delete the socket: the owner stops and starts the
// server again on a fresh socket). Stop() ends open streams, waits for in-flight calls, and
// removes the socket file; it is idempotent.
// Thread safety: all public methods may be called concurrently, except that Start and Stop must
// not race each other (the owner serializes its lifecycle).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "agent/topology.h"
#include "deviceplugin/allocate.h"
#include "deviceplugin/inventory.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace tessera::deviceplugin {

inline constexpr char kHealthy[] = "Healthy";
inline constexpr char kUnhealthy[] = "Unhealthy";

class ResourceServer {
 public:
  ResourceServer(Resource resource, agent::TopologyMatrix topology, AllocateOptions options,
                 HealthFn healthy);
  ~ResourceServer();

  ResourceServer(const ResourceServer&) = delete;
  ResourceServer& operator=(const ResourceServer&) = delete;

  // Serves on `socket_path` (a stale file there is removed first).
  absl::Status Start(const std::string& socket_path);
  void Stop();
  void Refresh();

  const Resource& resource() const { return resource_; }
  const std::string& socket_path() const { return socket_path_; }
  // The list ListAndWatch would send now.
  v1beta1::ListAndWatchResponse CurrentList() const;
  // The options this plugin registers with.
  static v1beta1::DevicePluginOptions Options();

 private:
  class Service;
  friend class Service;
  struct Stream {
    std::vector<v1beta1::ListAndWatchResponse> pending;
  };

  grpc::Status ListAndWatch(grpc::ServerContext* context,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer);
  grpc::Status Allocate(const v1beta1::AllocateRequest& request,
                        v1beta1::AllocateResponse* response);
  grpc::Status GetPreferredAllocation(const v1beta1::PreferredAllocationRequest& request,
                                      v1beta1::PreferredAllocationResponse* response);
  v1beta1::ListAndWatchResponse BuildList(const std::vector<bool>& health) const;
  std::vector<bool> ReadHealth() const;

  const Resource resource_;
  const agent::TopologyMatrix topology_;
  const AllocateOptions options_;
  const HealthFn healthy_;

  std::string socket_path_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable absl::Mutex mu_;
  std::vector<bool> health_ ABSL_GUARDED_BY(mu_);  // per device, as last sent
  std::vector<Stream*> streams_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tessera::deviceplugin
