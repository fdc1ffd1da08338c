// TestKubelet: kubelet's side of the device plugin API v1beta1, for tests. Written separately
// from the plugin (it shares only the generated code of the same .proto), it plays what a real
// kubelet does: serves v1beta1.Registration on <dir>/kubelet.sock, checks each RegisterRequest
// (version "v1beta1", a bare socket file name that exists in <dir>, a "domain/name" resource),
// and talks to a plugin as a v1beta1.DevicePlugin client (PluginClient).
// Restart() plays a kubelet restart: stop serving, delete every socket in the directory, serve
// kubelet.sock again. RefuseNext(n) refuses the next n valid registrations (as a kubelet whose
// device manager is not ready does), to test the plugin's retries.
// Thread safety: all methods may be called concurrently; waits use real time with timeouts.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace tessera::deviceplugin::testing {

// A v1beta1.DevicePlugin client with a background ListAndWatch reader.
class PluginClient {
 public:
  explicit PluginClient(const std::string& socket_path);
  ~PluginClient();

  PluginClient(const PluginClient&) = delete;
  PluginClient& operator=(const PluginClient&) = delete;

  grpc::Status GetDevicePluginOptions(v1beta1::DevicePluginOptions* out);
  grpc::Status Allocate(const v1beta1::AllocateRequest& request, v1beta1::AllocateResponse* out);
  grpc::Status GetPreferredAllocation(const v1beta1::PreferredAllocationRequest& request,
                                      v1beta1::PreferredAllocationResponse* out);
  grpc::Status PreStartContainer(const v1beta1::PreStartContainerRequest& request);

  // Opens ListAndWatch; every received list is kept in order.
  void StartWatch();
  // Waits until a list received at position >= `from` satisfies `pred`; returns it.
  std::optional<v1beta1::ListAndWatchResponse> WaitForList(
      const std::function<bool(const v1beta1::ListAndWatchResponse&)>& pred, size_t from,
      absl::Duration timeout);
  std::vector<v1beta1::ListAndWatchResponse> lists() const;
  // Whether the stream ended (the plugin stopped serving).
  bool WaitForStreamEnd(absl::Duration timeout);

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  grpc::ClientContext watch_context_;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::vector<v1beta1::ListAndWatchResponse> lists_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
};

// "GPU-a" -> "Healthy" for every device of a list.
std::map<std::string, std::string> HealthById(const v1beta1::ListAndWatchResponse& list);

class TestKubelet {
 public:
  explicit TestKubelet(std::string dir);
  ~TestKubelet();

  TestKubelet(const TestKubelet&) = delete;
  TestKubelet& operator=(const TestKubelet&) = delete;

  absl::Status Start();
  // Stops serving and deletes every socket in the directory (kubelet.sock included).
  void StopAndDeleteSockets();
  // StopAndDeleteSockets() then Start().
  absl::Status Restart();

  // Waits until `n` registrations were accepted in total; false on timeout.
  bool WaitForRegistrations(size_t n, absl::Duration timeout) const;
  std::vector<v1beta1::RegisterRequest> registrations() const;
  // Requests kubelet refused, with the reason.
  std::vector<std::string> rejections() const;
  // Waits until `n` registrations were refused in total; false on timeout.
  bool WaitForRejections(size_t n, absl::Duration timeout) const;
  // Refuses the next `n` otherwise valid registrations with UNAVAILABLE.
  void RefuseNext(int n);

  const std::string& dir() const { return dir_; }
  // A client for a registered endpoint (a file name in the directory).
  std::unique_ptr<PluginClient> Connect(const std::string& endpoint) const;

 private:
  class RegistrationService;
  grpc::Status OnRegister(const v1beta1::RegisterRequest& request);

  const std::string dir_;
  std::unique_ptr<RegistrationService> service_;
  std::unique_ptr<grpc::Server> server_;
  mutable absl::Mutex mu_;
  std::vector<v1beta1::RegisterRequest> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> rejections_ ABSL_GUARDED_BY(mu_);
  int refuse_next_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::deviceplugin::testing
