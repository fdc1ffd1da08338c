#include "dra/driver.h"

#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/discovery.h"
#include "kube/api_error.h"
#include "kube/resource.h"
#include "kube/rest_client.h"

namespace tessera::dra {

SliceWriter KubeSliceWriter(std::shared_ptr<kube::RestClient> client) {
  return [client = std::move(client)](const std::string& name,
                                      const kube::Json* slice) -> absl::Status {
    const kube::ResourceType& t = kube::ResourceSlicesResource();
    if (slice == nullptr) {
      absl::Status st = client->Delete(t, "", name);
      return kube::IsApiNotFound(st) ? absl::OkStatus() : st;
    }
    absl::StatusOr<kube::Json> current = client->Get(t, "", name);
    absl::StatusOr<kube::Json> written;
    if (kube::IsApiNotFound(current.status())) {
      written = client->Create(t, "", *slice);
    } else if (!current.ok()) {
      return current.status();
    } else {
      kube::Json next = *slice;
      next["metadata"]["resourceVersion"] = (*current)["metadata"].value("resourceVersion", "");
      written = client->Update(t, "", name, next);
    }
    if (!written.ok()) return written.status();
    const kube::Json spec = slice->value("spec", kube::Json::object());
    if (spec.contains("sharedCounters") &&
        !written->value("spec", kube::Json::object()).contains("sharedCounters")) {
      return absl::FailedPreconditionError(
          absl::StrCat("ResourceSlice ", name,
                       ": the API server dropped spec.sharedCounters (DRAPartitionableDevices is "
                       "off)"));
    }
    return absl::OkStatus();
  };
}

ClaimGetter KubeClaimGetter(std::shared_ptr<kube::RestClient> client) {
  return [client = std::move(client)](const std::string& ns, const std::string& name) {
    return client->Get(kube::ResourceClaimsResource(), ns, name);
  };
}

DraDriver::DraDriver(agent::GpuBackend& backend, Clock& clock, ClaimGetter get, SliceWriter write,
                     DriverOptions options)
    : backend_(backend),
      clock_(clock),
      get_(std::move(get)),
      write_(std::move(write)),
      options_(std::move(options)),
      health_(options_.health) {
  if (options_.checkpoint_path.empty()) {
    options_.checkpoint_path =
        (std::filesystem::path(options_.plugin_dir) / "checkpoint.json").string();
  }
}

DraDriver::~DraDriver() { Stop(); }

void DraDriver::Log(absl::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "dra-driver: " << line << "\n";
  }
}

kube::Json DraDriver::slice() const {
  absl::MutexLock l(&mu_);
  return slices_.empty() ? kube::Json() : slices_.front();
}

std::vector<kube::Json> DraDriver::slices() const {
  absl::MutexLock l(&mu_);
  return slices_;
}

void DraDriver::Publish() {
  kube::Json value;
  {
    absl::MutexLock l(&mu_);
    std::vector<kube::Json> next = ResourceSlicesJson(
        options_.driver, options_.node_name, devices_,
        [this](const std::string& uuid) { return health_.IsHealthy(uuid); }, generation_,
        partitionable_);
    std::vector<std::string> names;
    for (const kube::Json& d : next.front()["spec"]["devices"]) names.push_back(d["name"]);
    const std::string joined = absl::StrCat(absl::StrJoin(names, ","), "/", next.size());
    if (!slices_.empty() && joined == published_devices_) return;
    if (!slices_.empty()) {
      ++generation_;
      for (kube::Json& s : next) s["spec"]["pool"]["generation"] = generation_;
    }
    published_devices_ = joined;
    slices_ = next;
    value = std::move(next);
  }
  if (publisher_) publisher_->Set({value.dump(), true});
}

void DraDriver::Republish() {
  if (publisher_) publisher_->Resync();
}

absl::Status DraDriver::WriteSlices(const std::string& value) {
  const std::string devices = SliceName(options_.driver, options_.node_name);
  const std::string counters = CounterSliceName(options_.driver, options_.node_name);
  if (value.empty()) {
    absl::Status st = write_(devices, nullptr);
    if (absl::Status c = write_(counters, nullptr); st.ok()) st = c;
    return st;
  }
  const kube::Json slices = kube::Json::parse(value);
  // The counter sets first: the devices name them.
  for (auto it = slices.rbegin(); it != slices.rend(); ++it) {
    const std::string name = (*it)["metadata"].value("name", "");
    absl::Status st = write_(name, &*it);
    if (absl::IsFailedPrecondition(st) && name == counters) {
      // This API server does not keep counter sets: publish without partitionable devices.
      Log(absl::StrCat(st.message(), "; publishing GPUs in MIG mode as their instances only"));
      {
        absl::MutexLock l(&mu_);
        partitionable_ = false;
      }
      Publish();
      return st;
    }
    if (!st.ok()) return st;
    if (name == counters) counters_may_exist_ = true;
  }
  if (slices.size() == 1 && counters_may_exist_) {
    if (absl::Status st = write_(counters, nullptr); !st.ok()) return st;
    counters_may_exist_ = false;
  }
  return absl::OkStatus();
}

absl::Status DraDriver::Start() {
  if (started_) return absl::FailedPreconditionError("DRA driver already started (runs once)");
  if (options_.node_name.empty()) return absl::InvalidArgumentError("node name is empty");
  absl::StatusOr<agent::NodeSnapshot> node = agent::Discover(backend_);
  if (!node.ok()) return node.status();
  for (const agent::GpuSnapshot& g : node->gpus) {
    if (!g.info.uuid.empty()) health_.AddGpu(g.info.uuid);
  }
  devices_ = BuildDraDevices(*node);
  std::vector<std::string> names;
  for (const DraDevice& d : devices_) names.push_back(d.name);
  Log(absl::StrCat("devices: ", names.empty() ? "none" : absl::StrJoin(names, ", ")));

  PreparerOptions po;
  po.driver = options_.driver;
  po.pool = options_.node_name;
  po.cdi_dir = options_.cdi_dir;
  po.checkpoint_path = options_.checkpoint_path;
  po.dev_root = options_.dev_root;
  po.log = options_.log;
  ClaimGetter get = get_;
  if (!get) {
    get = [](const std::string&, const std::string&) -> absl::StatusOr<kube::Json> {
      return absl::FailedPreconditionError("the driver has no API access (--kubeconfig)");
    };
  }
  preparer_ = std::make_unique<ClaimPreparer>(std::move(get), devices_, po);
  checkpoint_status_ = preparer_->Load();

  KubeletServerOptions so;
  so.driver = options_.driver;
  so.plugin_dir = options_.plugin_dir;
  so.registry_dir = options_.registry_dir;
  so.log = options_.log;
  // kubelet deletes its node's slices when it starts, before drivers register again.
  so.on_registered = [this] { Republish(); };
  server_ = std::make_unique<KubeletServer>(*preparer_, so);

  if (write_) {
    deviceplugin::NodeAnnotatorOptions po2 = options_.publish;
    po2.node_name = options_.node_name;
    po2.key = absl::StrCat("ResourceSlice ", SliceName(options_.driver, options_.node_name));
    po2.describe = [](const std::string& v) {
      const kube::Json j = kube::Json::parse(v, nullptr, false);
      if (j.is_discarded() || !j.is_array() || j.empty()) return v;
      std::vector<std::string> names, sets;
      for (const kube::Json& d : j[0]["spec"]["devices"]) names.push_back(d["name"]);
      if (j.size() > 1) {
        for (const kube::Json& c : j[1]["spec"]["sharedCounters"]) sets.push_back(c["name"]);
      }
      return absl::StrCat("generation ", j[0]["spec"]["pool"]["generation"].dump(), ", devices [",
                          absl::StrJoin(names, " "), "]",
                          sets.empty() ? "" : ", counter sets [" + absl::StrJoin(sets, " ") + "]");
    };
    if (!po2.log) {
      po2.log = [this](absl::string_view line) { Log(line); };
    }
    publisher_ = std::make_unique<deviceplugin::NodeAnnotator>(
        [this](const std::string& value) { return WriteSlices(value); }, clock_, po2);
  }
  health_.AddListener([this](const agent::HealthTransition& t) {
    const std::string_view from = agent::HealthName(t.from);
    const std::string_view to = agent::HealthName(t.to);
    Log(absl::StrCat(t.uuid, " ", absl::string_view(from.data(), from.size()), " -> ",
                     absl::string_view(to.data(), to.size()), ": ", t.reason));
    Publish();
  });
  Publish();
  // Serve kubelet once the publisher exists (registration republishes through it); publish
  // only once kubelet can be served.
  if (absl::Status st = server_->Start(); !st.ok()) return st;
  if (publisher_) publisher_->Start();

  agent::HealthMonitor::Options mo;
  mo.sample_every = options_.metrics_every;
  mo.wait_failure_backoff = options_.wait_failure_backoff;
  monitor_thread_ = std::thread([this, mo] {
    agent::HealthMonitor monitor(backend_, health_, clock_, mo);
    if (absl::Status st = monitor.Start(); !st.ok()) {
      Log(absl::StrCat("health monitor: ", st.message()));
    }
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      monitor_ = &monitor;
    }
    monitor.RunUntil(absl::InfiniteFuture());
    absl::MutexLock l(&mu_);
    monitor_ = nullptr;
  });
  started_ = true;
  return absl::OkStatus();
}

void DraDriver::Stop() {
  if (!started_) return;
  started_ = false;
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    if (monitor_ != nullptr) monitor_->Stop();
  }
  if (monitor_thread_.joinable()) monitor_thread_.join();
  server_->Stop();
  if (publisher_) publisher_->Stop();
  if (options_.cleanup_on_exit && write_) {
    for (const std::string& name : {SliceName(options_.driver, options_.node_name),
                                    CounterSliceName(options_.driver, options_.node_name)}) {
      if (absl::Status st = write_(name, nullptr); st.ok()) {
        Log(absl::StrCat("deleted ResourceSlice ", name));
      } else {
        Log(absl::StrCat("deleting ResourceSlice ", name, ": ", st.message()));
      }
    }
  }
}

}  // namespace tessera::dra
