#include "deviceplugin/node_annotator.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kube/kubeconfig.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "model/node_topology.h"

namespace tessera::deviceplugin {
namespace {

model::LinkClass ModelLink(agent::LinkClass c) {
  switch (c) {
    case agent::LinkClass::kSelf:
      return model::LinkClass::kSelf;
    case agent::LinkClass::kNvLink:
      return model::LinkClass::kNvLink;
    case agent::LinkClass::kPcieSwitch:
      return model::LinkClass::kPcieSwitch;
    case agent::LinkClass::kHostBridge:
      return model::LinkClass::kPcieHostBridge;
    case agent::LinkClass::kCrossNuma:
    case agent::LinkClass::kUnknown:
      break;
  }
  return model::LinkClass::kCrossNuma;
}

}  // namespace

NvLinkDomains NvLinkDomainsOf(const agent::NodeSnapshot& node,
                              const std::vector<Resource>& resources) {
  NvLinkDomains out;
  // The physical GPUs of nvidia.com/gpu, in device order (one device per whole GPU).
  std::vector<int> gpus;
  for (const Resource& r : resources) {
    if (r.name != kGpuResource) continue;
    for (const PluginDevice& d : r.devices) gpus.push_back(d.gpu_index);
  }
  const agent::TopologyMatrix& topo = node.topology;
  const int n = static_cast<int>(gpus.size());
  std::vector<model::LinkClass> links(static_cast<size_t>(n) * n, model::LinkClass::kCrossNuma);
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      const int ga = gpus[a], gb = gpus[b];
      if (a == b) {
        links[a * n + b] = model::LinkClass::kSelf;
      } else if (ga >= 0 && gb >= 0 && ga < topo.size && gb < topo.size) {
        links[a * n + b] = ModelLink(topo.Link(ga, gb));
      }
    }
  }
  out.value = absl::StrJoin(model::NvLinkIslands(n, links), ",");
  for (int g : gpus) {
    // Without its bus id no NVLink of another GPU can be matched to this one.
    if (g < 0 || g >= static_cast<int>(node.gpus.size()) || g >= topo.size ||
        node.gpus[g].info.pci_bus_id.empty()) {
      out.complete = false;
    }
  }
  return out;
}

NodePatcher KubeNodePatcher(std::shared_ptr<kube::RestClient> client, std::string node_name) {
  return [client = std::move(client), node = std::move(node_name)](const std::string& value) {
    kube::Json v = value.empty() ? kube::Json(nullptr) : kube::Json(value);
    kube::Json annotations = kube::Json::object();
    annotations[kNvlinkDomainsAnnotation] = std::move(v);
    kube::Json patch = kube::Json::object();
    patch["metadata"]["annotations"] = std::move(annotations);
    return client->MergePatch(kube::NodesResource(), "", node, patch).status();
  };
}

absl::StatusOr<std::shared_ptr<kube::RestClient>> NodeApiClient(const std::string& kubeconfig) {
  absl::StatusOr<kube::KubeConfig> config = kube::ConfigFromFlags(kubeconfig);
  if (!config.ok()) return config.status();
  kube::RestOptions opts;
  opts.timeout = absl::Seconds(10);
  opts.connect_timeout = absl::Seconds(5);
  opts.max_idle_connections = 1;
  opts.user_agent = "tessera-device-plugin";
  absl::StatusOr<std::unique_ptr<kube::RestClient>> client =
      kube::RestClient::Create(*std::move(config), opts);
  if (!client.ok()) return client.status();
  return std::shared_ptr<kube::RestClient>(*std::move(client));
}

NodeAnnotator::NodeAnnotator(NodePatcher patch, Clock& clock, NodeAnnotatorOptions options)
    : patch_(std::move(patch)), clock_(clock), options_(std::move(options)) {}

NodeAnnotator::~NodeAnnotator() { Stop(); }

void NodeAnnotator::Log(absl::string_view line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::cerr << "device-plugin: " << line << "\n";
  }
}

void NodeAnnotator::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void NodeAnnotator::Stop() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
    woken_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void NodeAnnotator::Set(const NvLinkDomains& domains) {
  auto ids = [](const std::string& v) {
    return v.empty() ? 0 : std::count(v.begin(), v.end(), ',') + 1;
  };
  absl::MutexLock l(&mu_);
  if (!domains.complete && desired_.has_value() && desired_complete_ &&
      ids(*desired_) == ids(domains.value)) {
    return;
  }
  desired_complete_ = domains.complete;
  if (desired_ == domains.value) return;
  desired_ = domains.value;
  woken_ = true;
}

void NodeAnnotator::Resync() {
  absl::MutexLock l(&mu_);
  forced_ = true;
  woken_ = true;
}

std::optional<std::string> NodeAnnotator::written() const {
  absl::MutexLock l(&mu_);
  return written_;
}

int NodeAnnotator::attempts() const {
  absl::MutexLock l(&mu_);
  return attempts_;
}

void NodeAnnotator::Run() {
  const std::string& key = options_.key;
  absl::Duration backoff = absl::ZeroDuration();
  mu_.Lock();
  while (true) {
    // Wait until a patch is due: a value not written yet (once any backoff has run out), or a
    // resync; wake for Set and Stop, and at least every `poll` to read the clock again.
    std::string want;
    while (true) {
      if (stop_) {
        mu_.Unlock();
        return;
      }
      woken_ = false;
      const absl::Time now = clock_.Now();
      absl::Time until = absl::InfiniteFuture();
      if (desired_.has_value()) {
        if (forced_ && desired_ == written_) {
          forced_ = false;
          break;
        }
        if (desired_ != written_) {
          if (now >= retry_due_) break;
          until = retry_due_;
        } else if (now >= resync_due_) {
          break;
        } else {
          until = resync_due_;
        }
      }
      const absl::Duration wait =
          std::max(std::min(until - now, options_.poll), absl::ZeroDuration());
      mu_.AwaitWithTimeout(absl::Condition(&woken_), wait);
    }
    want = *desired_;
    const bool changed = written_ != want;
    ++attempts_;
    mu_.Unlock();
    const absl::Status st = patch_(want);
    mu_.Lock();
    const absl::Time now = clock_.Now();
    if (st.ok()) {
      written_ = want;
      backoff = absl::ZeroDuration();
      retry_due_ = absl::InfinitePast();
      resync_due_ = options_.resync_every > absl::ZeroDuration() ? now + options_.resync_every
                                                                 : absl::InfiniteFuture();
      if (changed) {
        Log(want.empty() ? absl::StrCat("node ", options_.node_name, ": removed ", key)
                         : absl::StrCat("node ", options_.node_name, ": ", key, "=",
                                        options_.describe ? options_.describe(want) : want));
      }
    } else {
      backoff = backoff == absl::ZeroDuration() ? options_.retry_initial
                                                : std::min(backoff * 2, options_.retry_max);
      retry_due_ = now + backoff;
      // A resync that failed is retried as a change: the Node may no longer carry the value.
      written_.reset();
      Log(absl::StrCat("node ", options_.node_name, ": writing ", key, ": ", st.message(),
                       "; retrying in ", absl::FormatDuration(backoff)));
    }
  }
}

}  // namespace tessera::deviceplugin
