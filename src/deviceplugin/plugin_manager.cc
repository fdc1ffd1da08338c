#include "deviceplugin/plugin_manager.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "deviceplugin/registration.h"

namespace tessera::deviceplugin {
namespace {

bool SameDevice(const PluginDevice& a, const PluginDevice& b) {
  return a.id == b.id && a.gpu_uuid == b.gpu_uuid && a.gpu_index == b.gpu_index &&
         a.minor == b.minor && a.numa_node == b.numa_node && a.mig_profile == b.mig_profile;
}

bool SameResource(const Resource& a, const Resource& b) {
  if (a.name != b.name || a.socket_name != b.socket_name) return false;
  if (a.devices.size() != b.devices.size()) return false;
  for (size_t i = 0; i < a.devices.size(); ++i) {
    if (!SameDevice(a.devices[i], b.devices[i])) return false;
  }
  return true;
}

std::string Describe(const std::vector<Resource>& resources) {
  std::vector<std::string> names;
  for (const Resource& r : resources) {
    names.push_back(absl::StrCat(r.name, " (", r.devices.size(), " devices)"));
  }
  return names.empty() ? "none" : absl::StrJoin(names, ", ");
}

}  // namespace

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

std::vector<Resource> DevicePluginManager::resources() const {
  absl::ReaderMutexLock l(&servers_mu_);
  std::vector<Resource> out;
  for (const auto& s : servers_) out.push_back(s->resource());
  return out;
}

std::unique_ptr<ResourceServer> DevicePluginManager::MakeServer(
    const Resource& resource, const agent::TopologyMatrix& topology) {
  return std::make_unique<ResourceServer>(
      resource, topology, options_.allocate,
      [this](const std::string& uuid) { return health_.IsHealthy(uuid); });
}

void DevicePluginManager::RefreshAll() {
  absl::ReaderMutexLock l(&servers_mu_);
  for (auto& s : servers_) s->Refresh();
}

absl::Status DevicePluginManager::Start() {
  absl::MutexLock l(&lifecycle_mu_);
  {
    absl::ReaderMutexLock s(&servers_mu_);
    if (started_ || !servers_.empty()) {
      return absl::FailedPreconditionError("device plugin already started (Start runs once)");
    }
  }
  ASSIGN_OR_RETURN(agent::NodeSnapshot node, agent::Discover(backend_));
  // GPUs that do not answer now are reported lost by the monitor's first sample.
  for (const agent::GpuSnapshot& g : node.gpus) {
    gpu_uuids_.push_back(g.info.uuid);
    if (!g.info.uuid.empty()) health_.AddGpu(g.info.uuid);
  }
  const std::vector<Resource> resources = BuildInventory(node, options_.mig_strategy);
  if (options_.on_inventory) options_.on_inventory(node, resources);
  std::vector<std::unique_ptr<ResourceServer>> servers;
  for (const Resource& r : resources) servers.push_back(MakeServer(r, node.topology));
  health_.AddListener([this](const agent::HealthTransition& t) {
    const std::string_view from = agent::HealthName(t.from);
    const std::string_view to = agent::HealthName(t.to);
    Log(absl::StrCat(t.uuid, " ", absl::string_view(from.data(), from.size()), " -> ",
                     absl::string_view(to.data(), to.size()), ": ", t.reason));
    RefreshAll();
  });
  Log(absl::StrCat("resources: ", Describe(resources)));

  // Watch before the first registration so that a kubelet starting in between is not missed.
  ASSIGN_OR_RETURN(watcher_,
                   FileCreationWatcher::Start(options_.plugin_dir, kKubeletSocket, [this] {
                     absl::MutexLock l(&lifecycle_mu_);
                     if (!started_) return;
                     Log("kubelet.sock created: serving and registering again");
                     ServeAndRegisterAll();
                   }));
  for (auto& s : servers) {
    absl::Status st = s->Start(SocketPath(s->resource()));
    if (!st.ok()) {
      for (auto& started : servers) started->Stop();
      watcher_.reset();
      return st;
    }
  }
  {
    absl::MutexLock s(&servers_mu_);
    servers_ = std::move(servers);
  }
  started_ = true;
  {
    absl::ReaderMutexLock s(&servers_mu_);
    for (auto& server : servers_) RegisterOne(*server);
  }
  // Timers start now, not whenever the thread gets going.
  events_ = std::thread([this, start = clock_.Now()] { EventLoop(start); });
  return absl::OkStatus();
}

void DevicePluginManager::ServeAndRegisterAll() {
  {
    // A new kubelet: the backoff starts over.
    absl::MutexLock r(&retry_mu_);
    retries_.clear();
  }
  absl::ReaderMutexLock l(&servers_mu_);
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
  const std::string& name = server.resource().name;
  const std::string kubelet = absl::StrCat(options_.plugin_dir, "/", kKubeletSocket);
  absl::Status st;
  if (::access(kubelet.c_str(), F_OK) != 0) {
    st = absl::UnavailableError(
        absl::StrCat("no ", kubelet, " yet; ", name, " registers when kubelet creates it"));
  } else {
    v1beta1::RegisterRequest req;
    req.set_version(kApiVersion);
    req.set_endpoint(server.resource().socket_name);
    req.set_resource_name(name);
    *req.mutable_options() = ResourceServer::Options();
    st = RegisterWithKubelet(kubelet, req, options_.register_timeout);
  }
  if (st.ok()) {
    {
      absl::MutexLock r(&retry_mu_);
      retries_.erase(name);
    }
    ++registrations_;
    Log(absl::StrCat("registered ", name, " on ", server.socket_path()));
    return;
  }
  absl::Duration backoff = options_.register_retry_initial;
  {
    absl::MutexLock r(&retry_mu_);
    auto it = retries_.find(name);
    if (it != retries_.end()) {
      backoff = std::min(it->second.backoff * 2, options_.register_retry_max);
    }
    retries_[name] = RegisterRetry{backoff, clock_.Now() + backoff};
  }
  Log(absl::StrCat(st.message(), "; retrying in ", absl::FormatDuration(backoff)));
}

std::optional<absl::Time> DevicePluginManager::NextRegisterRetry() const {
  absl::MutexLock r(&retry_mu_);
  std::optional<absl::Time> next;
  for (const auto& [name, retry] : retries_) {
    if (!next || retry.due < *next) next = retry.due;
  }
  return next;
}

void DevicePluginManager::RetryDueRegistrations() {
  std::vector<std::string> due;
  {
    absl::MutexLock r(&retry_mu_);
    for (const auto& [name, retry] : retries_) {
      if (retry.due <= clock_.Now()) due.push_back(name);
    }
  }
  if (due.empty()) return;
  absl::MutexLock l(&lifecycle_mu_);
  if (!started_) return;
  absl::ReaderMutexLock s(&servers_mu_);
  for (const std::string& name : due) {
    auto it = std::find_if(servers_.begin(), servers_.end(),
                           [&](const auto& server) { return server->resource().name == name; });
    if (it == servers_.end()) {  // no longer served
      absl::MutexLock r(&retry_mu_);
      retries_.erase(name);
      continue;
    }
    RegisterOne(**it);
  }
}

std::vector<std::string> DevicePluginManager::Rescan() {
  absl::StatusOr<agent::NodeSnapshot> node = agent::Discover(backend_);
  if (!node.ok()) {
    Log(absl::StrCat("rediscovery: ", node.status().message()));
    return gpu_uuids_;
  }
  std::vector<std::string> uuids;
  for (const agent::GpuSnapshot& g : node->gpus) {
    uuids.push_back(g.info.uuid);
    if (!g.info.uuid.empty()) health_.AddGpu(g.info.uuid);
  }
  const std::vector<Resource> next = BuildInventory(*node, options_.mig_strategy);
  if (options_.on_inventory) options_.on_inventory(*node, next);

  absl::MutexLock l(&lifecycle_mu_);
  if (!started_) return uuids;
  std::vector<std::unique_ptr<ResourceServer>> keep, retire, fresh;
  {
    absl::MutexLock s(&servers_mu_);
    for (auto& server : servers_) {
      bool unchanged = false;
      for (const Resource& r : next) unchanged |= SameResource(r, server->resource());
      (unchanged ? keep : retire).push_back(std::move(server));
    }
    if (retire.empty() && keep.size() == next.size()) {
      servers_ = std::move(keep);
      return uuids;
    }
    for (const Resource& r : next) {
      bool known = false;
      for (const auto& k : keep) known |= SameResource(r, k->resource());
      if (!known) fresh.push_back(MakeServer(r, node->topology));
    }
    servers_ = std::move(keep);
  }
  Log(absl::StrCat("GPU inventory changed; resources now: ", Describe(next)));
  // Stop before starting: a changed resource keeps its socket name.
  for (auto& server : retire) {
    Log(absl::StrCat("stopped serving ", server->resource().name));
    server->Stop();
    absl::MutexLock r(&retry_mu_);
    retries_.erase(server->resource().name);
  }
  std::vector<ResourceServer*> serving;
  for (auto& server : fresh) {
    absl::Status st = server->Start(SocketPath(server->resource()));
    if (st.ok()) {
      serving.push_back(server.get());
    } else {
      // Kept, so that the next kubelet restart tries again.
      Log(absl::StrCat("serving ", server->resource().name, ": ", st.message()));
    }
  }
  {
    absl::MutexLock s(&servers_mu_);
    for (auto& server : fresh) {
      server->Refresh();  // health may have changed since it was built
      servers_.push_back(std::move(server));
    }
    std::sort(servers_.begin(), servers_.end(),
              [](const auto& a, const auto& b) { return a->resource().name < b->resource().name; });
  }
  // Registered once listed: kubelet may call back at once. lifecycle_mu_ keeps them alive.
  for (ResourceServer* server : serving) RegisterOne(*server);
  return uuids;
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
  {
    absl::MutexLock l(&monitor_mu_);
    if (monitor_ != nullptr) monitor_->Stop();
  }
  if (events_.joinable()) events_.join();
  absl::MutexLock l(&lifecycle_mu_);
  absl::ReaderMutexLock s(&servers_mu_);
  for (auto& server : servers_) server->Stop();
}

void DevicePluginManager::EventLoop(absl::Time start) {
  agent::HealthMonitor::Options mo;
  mo.sample_every = options_.metrics_every;
  mo.wait_failure_backoff = options_.wait_failure_backoff;
  const bool rescan = options_.rescan_every > absl::ZeroDuration();
  absl::Time next_rescan = rescan ? start + options_.rescan_every : absl::InfiniteFuture();
  std::vector<std::string> uuids = gpu_uuids_;
  while (!stop_) {
    // A fresh monitor whenever the set of GPUs changed (it registers them at its Start).
    agent::HealthMonitor monitor(backend_, health_, clock_, mo);
    if (absl::Status st = monitor.Start(); !st.ok()) {
      Log(absl::StrCat("health monitor: ", st.message()));
    }
    {
      absl::MutexLock l(&monitor_mu_);
      monitor_ = &monitor;
    }
    while (!stop_) {
      // Wake for the next rescan or registration retry, and at least every metrics_every so
      // that a retry scheduled meanwhile by another thread is not late by more than that.
      absl::Time until = std::min(next_rescan, clock_.Now() + options_.metrics_every);
      if (std::optional<absl::Time> retry = NextRegisterRetry()) until = std::min(until, *retry);
      monitor.RunUntil(until);
      if (stop_) break;
      RetryDueRegistrations();
      if (!rescan || clock_.Now() < next_rescan) continue;
      // Schedule from the time the rescan was due to start, not from when it ended.
      next_rescan = clock_.Now() + options_.rescan_every;
      std::vector<std::string> now = Rescan();
      if (now != uuids) {
        Log("the set of GPUs changed; restarting the health monitor");
        uuids = std::move(now);
        gpu_uuids_ = uuids;
        break;
      }
    }
    absl::MutexLock l(&monitor_mu_);
    monitor_ = nullptr;
  }
}

}  // namespace tessera::deviceplugin
