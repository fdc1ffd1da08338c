#include "deviceplugin/plugin_server.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace tessera::deviceplugin {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// How often a waiting ListAndWatch checks whether kubelet went away.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(200);

}  // namespace

// The generated service; forwards to the owner. One per Start(), so a restarted server never
// reuses a service object that was registered with a previous grpc::Server.
class ResourceServer::Service final : public v1beta1::DevicePlugin::Service {
 public:
  explicit Service(ResourceServer& owner) : owner_(owner) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* response) override {
    *response = ResourceServer::Options();
    return grpc::Status::OK;
  }
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    return owner_.ListAndWatch(context, writer);
  }
  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override {
    return owner_.GetPreferredAllocation(*request, response);
  }
  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    return owner_.Allocate(*request, response);
  }
  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    // Not required (pre_start_required is false); nothing to prepare.
    return grpc::Status::OK;
  }

 private:
  ResourceServer& owner_;
};

ResourceServer::ResourceServer(Resource resource, agent::TopologyMatrix topology,
                               AllocateOptions options, HealthFn healthy)
    : resource_(std::move(resource)),
      topology_(std::move(topology)),
      options_(std::move(options)),
      healthy_(std::move(healthy)) {
  absl::MutexLock l(&mu_);
  health_ = ReadHealth();
}

ResourceServer::~ResourceServer() { Stop(); }

v1beta1::DevicePluginOptions ResourceServer::Options() {
  v1beta1::DevicePluginOptions o;
  o.set_pre_start_required(false);
  o.set_get_preferred_allocation_available(true);
  return o;
}

std::vector<bool> ResourceServer::ReadHealth() const {
  std::vector<bool> h;
  h.reserve(resource_.devices.size());
  for (const PluginDevice& d : resource_.devices) h.push_back(healthy_(d.gpu_uuid));
  return h;
}

v1beta1::ListAndWatchResponse ResourceServer::BuildList(const std::vector<bool>& health) const {
  v1beta1::ListAndWatchResponse list;
  for (size_t i = 0; i < resource_.devices.size(); ++i) {
    const PluginDevice& d = resource_.devices[i];
    v1beta1::Device* dev = list.add_devices();
    dev->set_id(d.id);
    dev->set_health(health[i] ? kHealthy : kUnhealthy);
    if (d.numa_node.has_value() && *d.numa_node >= 0) {
      dev->mutable_topology()->add_nodes()->set_id(*d.numa_node);
    }
  }
  return list;
}

v1beta1::ListAndWatchResponse ResourceServer::CurrentList() const {
  absl::MutexLock l(&mu_);
  return BuildList(health_);
}

void ResourceServer::Refresh() {
  std::vector<bool> now = ReadHealth();
  absl::MutexLock l(&mu_);
  if (now == health_) return;
  health_ = std::move(now);
  const v1beta1::ListAndWatchResponse list = BuildList(health_);
  for (Stream* s : streams_) s->pending.push_back(list);
}

absl::Status ResourceServer::Start(const std::string& socket_path) {
  if (server_ != nullptr) return absl::FailedPreconditionError("device plugin server running");
  if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
    return absl::InternalError(
        absl::StrCat("removing stale socket ", socket_path, ": ", std::strerror(errno)));
  }
  {
    absl::MutexLock l(&mu_);
    stopping_ = false;
  }
  service_ = std::make_unique<Service>(*this);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("unix:", socket_path), grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    service_.reset();
    return absl::UnavailableError(absl::StrCat("cannot serve on unix socket ", socket_path));
  }
  socket_path_ = socket_path;
  return absl::OkStatus();
}

void ResourceServer::Stop() {
  if (server_ == nullptr) return;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;  // wakes and ends every ListAndWatch
  }
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
  service_.reset();
  ::unlink(socket_path_.c_str());
}

grpc::Status ResourceServer::ListAndWatch(
    grpc::ServerContext* context, grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  Stream stream;
  {
    absl::MutexLock l(&mu_);
    stream.pending.push_back(BuildList(health_));
    streams_.push_back(&stream);
  }
  auto unsubscribe = [&] {
    absl::MutexLock l(&mu_);
    streams_.erase(std::remove(streams_.begin(), streams_.end(), &stream), streams_.end());
  };
  while (true) {
    std::vector<v1beta1::ListAndWatchResponse> batch;
    {
      absl::MutexLock l(&mu_);
      auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stopping_ || !stream.pending.empty();
      };
      while (!ready() && !context->IsCancelled()) {
        mu_.AwaitWithTimeout(absl::Condition(&ready), kCancelPoll);
      }
      if (stopping_) {
        streams_.erase(std::remove(streams_.begin(), streams_.end(), &stream), streams_.end());
        return grpc::Status::OK;
      }
      batch.swap(stream.pending);
    }
    if (context->IsCancelled()) {
      unsubscribe();
      return grpc::Status::CANCELLED;
    }
    for (const v1beta1::ListAndWatchResponse& list : batch) {
      if (!writer->Write(list)) {
        unsubscribe();
        return grpc::Status(grpc::StatusCode::CANCELLED, "ListAndWatch stream closed by kubelet");
      }
    }
  }
}

grpc::Status ResourceServer::Allocate(const v1beta1::AllocateRequest& request,
                                      v1beta1::AllocateResponse* response) {
  absl::StatusOr<v1beta1::AllocateResponse> r =
      BuildAllocateResponse(request, resource_, healthy_, options_);
  if (!r.ok()) return ToGrpc(r.status());
  *response = *std::move(r);
  return grpc::Status::OK;
}

grpc::Status ResourceServer::GetPreferredAllocation(
    const v1beta1::PreferredAllocationRequest& request,
    v1beta1::PreferredAllocationResponse* response) {
  absl::StatusOr<v1beta1::PreferredAllocationResponse> r =
      BuildPreferredAllocationResponse(request, resource_, topology_);
  if (!r.ok()) return ToGrpc(r.status());
  *response = *std::move(r);
  return grpc::Status::OK;
}

}  // namespace tessera::deviceplugin
