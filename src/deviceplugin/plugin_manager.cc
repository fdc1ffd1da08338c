#include "deviceplugin/plugin_manager.h"

#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/discovery.h"
#include "common/status_macros.h"
#include "deviceplugin/registration.h"

namespace tessera::deviceplugin {

DevicePluginManager::DevicePluginManager(agent::GpuBackend& backend, Clock& clock,
                                         PluginOptions options)
    : backend_(backend), clock_(clock), options_(std::move(options)), health_(options_.health) {}

DevicePluginManager::~DevicePluginManager() { Stop(); }

void DevicePluginManager::Log(absl::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "device-plugin: " << line << "\n";
  }
}

std::string DevicePluginManager::SocketPath(const Resource& resource) const {
  std::string dir = options_.plugin_dir;
  if (!dir.empty() && dir.back() != '/') dir += '/';
  return dir + resource.socket_name;
}

absl::Status DevicePluginManager::Start() {
  absl::MutexLock l(&lifecycle_mu_);
  if (started_ || !servers_.empty()) {
    return absl::FailedPreconditionError("device plugin already started (Start runs once)");
  }
  ASSIGN_OR_RETURN(agent::NodeSnapshot node, agent::Discover(backend_));
  for (const agent::GpuSnapshot& g : node.gpus) {
    gpus_.push_back(g.info);
    if (g.info.uuid.empty()) continue;
    health_.AddGpu(g.info.uuid);
    if (!g.error.empty()) {
      // A GPU that does not answer at start is not fit for workloads until it is reset.
      agent::GpuEvent lost;
      lost.kind = agent::GpuEventKind::kGpuLost;
      lost.gpu_uuid = g.info.uuid;
      lost.time = clock_.Now();
      lost.detail = g.error;
      health_.OnEvent(lost);
    }
  }
  resources_ = BuildInventory(node, options_.mig_strategy);
  for (const Resource& r : resources_) {
    servers_.push_back(std::make_unique<ResourceServer>(
        r, node.topology, options_.allocate,
        [this](const std::string& uuid) { return health_.IsHealthy(uuid); }));
  }
  health_.AddListener([this](const agent::HealthTransition& t) {
    const std::string_view from = agent::HealthName(t.from);
    const std::string_view to = agent::HealthName(t.to);
    Log(absl::StrCat(t.uuid, " ", absl::string_view(from.data(), from.size()), " -> ",
                     absl::string_view(to.data(), to.size()), ": ", t.reason));
    for (auto& s : servers_) s->Refresh();
  });
  std::vector<std::string> names;
  for (const Resource& r : resources_) {
    names.push_back(absl::StrCat(r.name, " (", r.devices.size(), " devices)"));
  }
  Log(absl::StrCat("resources: ", names.empty() ? "none" : absl::StrJoin(names, ", ")));

  // Watch before the first registration so that a kubelet starting in between is not missed.
  ASSIGN_OR_RETURN(watcher_,
                   FileCreationWatcher::Start(options_.plugin_dir, kKubeletSocket, [this] {
                     absl::MutexLock l(&lifecycle_mu_);
                     if (!started_) return;
                     Log("kubelet.sock created: serving and registering again");
                     ServeAndRegisterAll();
                   }));
  for (auto& s : servers_) {
    absl::Status st = s->Start(SocketPath(s->resource()));
    if (!st.ok()) {
      for (auto& started : servers_) started->Stop();
      watcher_.reset();
      return st;
    }
  }
  started_ = true;
  for (auto& s : servers_) RegisterOne(*s);
  stop_ = false;
  events_ = std::thread([this] { EventLoop(); });
  return absl::OkStatus();
}

void DevicePluginManager::ServeAndRegisterAll() {
  for (auto& s : servers_) {
    s->Stop();
    absl::Status st = s->Start(SocketPath(s->resource()));
    if (!st.ok()) {
      Log(absl::StrCat("serving ", s->resource().name, ": ", st.message()));
      continue;
    }
    RegisterOne(*s);
  }
}

void DevicePluginManager::RegisterOne(const ResourceServer& server) {
  const std::string kubelet = absl::StrCat(options_.plugin_dir, "/", kKubeletSocket);
  if (::access(kubelet.c_str(), F_OK) != 0) {
    Log(absl::StrCat("no ", kubelet, " yet; ", server.resource().name,
                     " registers when kubelet creates it"));
    return;
  }
  v1beta1::RegisterRequest req;
  req.set_version(kApiVersion);
  req.set_endpoint(server.resource().socket_name);
  req.set_resource_name(server.resource().name);
  *req.mutable_options() = ResourceServer::Options();
  absl::Status st = RegisterWithKubelet(kubelet, req, options_.register_timeout);
  if (st.ok()) {
    ++registrations_;
    Log(absl::StrCat("registered ", server.resource().name, " on ", server.socket_path()));
  } else {
    Log(absl::StrCat(st.message(), "; retrying when kubelet.sock is created again"));
  }
}

void DevicePluginManager::Stop() {
  {
    absl::MutexLock l(&lifecycle_mu_);
    if (!started_) return;
    started_ = false;
  }
  // The watcher's callback takes lifecycle_mu_; stop it without holding the lock.
  if (watcher_) watcher_->Stop();
  stop_ = true;
  if (events_.joinable()) events_.join();
  absl::MutexLock l(&lifecycle_mu_);
  for (auto& s : servers_) s->Stop();
}

void DevicePluginManager::SampleMetrics() {
  for (const agent::GpuInfo& g : gpus_) {
    if (g.uuid.empty()) continue;
    absl::StatusOr<agent::GpuMetrics> m = backend_.GetMetrics(g.index);
    if (m.ok()) health_.OnMetrics(g.uuid, *m, clock_.Now());
  }
}

void DevicePluginManager::EventLoop() {
  absl::Time next_sample = clock_.Now();
  while (!stop_) {
    if (clock_.Now() >= next_sample) {
      SampleMetrics();
      next_sample = clock_.Now() + options_.metrics_every;
    }
    const absl::Duration wait =
        std::max(absl::ZeroDuration(), std::min(options_.event_poll, next_sample - clock_.Now()));
    absl::StatusOr<std::optional<agent::GpuEvent>> ev = backend_.WaitForEvent(wait);
    if (!ev.ok()) {
      Log(absl::StrCat("GPU event wait: ", ev.status().message()));
      clock_.Sleep(options_.event_poll);  // do not spin on a backend that keeps failing
      continue;
    }
    if (!ev->has_value()) continue;
    health_.OnEvent(**ev);
    if ((*ev)->kind == agent::GpuEventKind::kEventWaitFailed) clock_.Sleep(options_.event_poll);
  }
}

}  // namespace tessera::deviceplugin
