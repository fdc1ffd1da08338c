// KubeletServer: the driver's two gRPC endpoints for kubelet.
//
// - The registration socket, <registry_dir>/<driver>-reg.sock in kubelet's plugins_registry
//   directory, serves pluginregistration.Registration: GetInfo answers type "DRAPlugin", the
//   driver name, the DRA socket's path as endpoint and the services this driver implements
//   ("v1.DRAPlugin", "v1beta1.DRAPlugin"; kubelet picks the first it knows);
//   NotifyRegistrationStatus records kubelet's verdict (logged; registered() reads it). Kubelet
//   finds the socket by watching the directory, so there is nothing to call on kubelet's side.
// - The DRA socket, <plugin_dir>/dra.sock, serves DRAPlugin of kubelet's DRA API v1 and v1beta1
//   (the same messages, so v1beta1 calls are converted through the wire format): each claim of
//   a request gets its own entry in the answer, with devices or with its error, so one bad claim
//   never fails the others; the RPC itself fails only when the request cannot be read.
// Sockets are created at Start (a stale file of the same name is replaced) and removed at Stop.
// Thread safety: Start and Stop from one thread; the RPCs run on gRPC's threads and call the
// ClaimPreparer, which serializes them.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dra/preparer.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace tessera::dra {

inline constexpr char kDraPluginType[] = "DRAPlugin";
inline constexpr char kDraSocketName[] = "dra.sock";

struct KubeletServerOptions {
  std::string driver = kDefaultDriverName;
  std::string plugin_dir = "/var/lib/kubelet/plugins/gpu.tessera.dev";
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";
  std::function<void(absl::string_view)> log;  // default stderr
  // Called when kubelet says the registration succeeded (on its gRPC thread).
  std::function<void()> on_registered;
};

class KubeletServer {
 public:
  // `preparer` must outlive the server.
  KubeletServer(ClaimPreparer& preparer, KubeletServerOptions options);
  ~KubeletServer();
  KubeletServer(const KubeletServer&) = delete;
  KubeletServer& operator=(const KubeletServer&) = delete;

  // Serves the DRA socket, then the registration socket (kubelet may call at once).
  absl::Status Start();
  void Stop();  // idempotent

  std::string dra_socket() const;
  std::string registration_socket() const;
  // Whether kubelet's last NotifyRegistrationStatus said registered.
  bool registered() const { return registered_.load(); }

 private:
  class Registration;
  class PluginV1;
  class PluginV1beta1;
  void Log(absl::string_view line) const;

  ClaimPreparer& preparer_;
  const KubeletServerOptions options_;
  std::atomic<bool> registered_{false};
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::unique_ptr<grpc::Server> dra_server_, reg_server_;
};

}  // namespace tessera::dra
