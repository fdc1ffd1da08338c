// NodeAnnotator: writes the node's NVLink islands onto its Kubernetes Node, as the annotation
// `tessera.dev/nvlink-domains` that `tessera scheduler` reads (src/kubesched/translate.h).
//
// The value: one island id per `nvidia.com/gpu` device the plugin advertises, in device order
// (GPU index order; the position in that list is the GPU index the scheduler uses, and there are
// as many ids as the resource has devices), comma-separated: "0,0,0,0,0,0,0,0" on an NVSwitch
// node, "0,0,1,1" with NVLink-bridged pairs, "0,1,2,3" with PCIe only. The islands are
// model::NvLinkIslands of the link matrix restricted to those GPUs (NVLink or NVSwitch joins
// two GPUs, transitively; ids dense, GPU 0's island is 0). A GPU without an NVLink peer gets an
// island of its own, which the scheduler reads exactly as -1 ("no island"): each id it has to
// itself. GPUs in MIG mode (mixed strategy) are not nvidia.com/gpu devices and are left out.
// No nvidia.com/gpu devices: the annotation is removed (the value is "").
//
// The annotator keeps the value wanted and writes it with a JSON merge patch on its own thread,
// so the kubelet-facing gRPC servers never wait on the API: at the first value, whenever the
// value changes, and every `resync_every` (a Node deleted and registered again by kubelet, or an
// annotation edited by hand, gets it back). A failed patch (API unreachable, Node not there yet,
// RBAC) is logged and retried after `retry_initial`, doubling up to `retry_max`.
// A GPU that is lost vanishes from the inventory (its UUID cannot be read) and so from the list:
// the ids stay one per advertised device. A listed GPU whose PCI bus id is unknown cannot be
// matched to its NVLink peers; a value computed with one ("incomplete") does not replace a
// value of as many ids computed without, so such a GPU leaves the islands as they were.
// Thread safety: Set from any thread; Start and Stop from one.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/discovery.h"
#include "common/clock.h"
#include "deviceplugin/inventory.h"

namespace tessera::kube {
class RestClient;
}  // namespace tessera::kube

namespace tessera::deviceplugin {

// The key tessera scheduler reads (kubesched::kNvlinkDomainsAnnotation; the kube device plugin
// test holds the two to one contract).
inline constexpr char kNvlinkDomainsAnnotation[] = "tessera.dev/nvlink-domains";

struct NvLinkDomains {
  std::string value;     // "0,0,1,1"; "" without nvidia.com/gpu devices
  bool complete = true;  // false: a listed GPU's PCI bus id (its NVLink peers) is unknown
};

// The annotation's value for a discovered node and the resources built from it (BuildInventory).
NvLinkDomains NvLinkDomainsOf(const agent::NodeSnapshot& node,
                              const std::vector<Resource>& resources);

// Writes the value onto the Node ("" removes the annotation); an error is retried.
using NodePatcher = std::function<absl::Status(const std::string& value)>;

// Merge-patches metadata.annotations[tessera.dev/nvlink-domains] of Node `node_name`.
NodePatcher KubeNodePatcher(std::shared_ptr<kube::RestClient> client, std::string node_name);

// The API client of `tessera device-plugin --kubeconfig`: the file named, or the in-cluster
// config (service-account token) when `kubeconfig` is empty. Short request timeouts: a patch in
// flight delays only the annotator's stop.
absl::StatusOr<std::shared_ptr<kube::RestClient>> NodeApiClient(const std::string& kubeconfig);

struct NodeAnnotatorOptions {
  absl::Duration retry_initial = absl::Seconds(1);
  absl::Duration retry_max = absl::Seconds(60);
  absl::Duration resync_every = absl::Minutes(10);  // 0: only when the value changes
  // The longest real-time wait before the clock is read again (a manual clock moves unseen).
  absl::Duration poll = absl::Seconds(1);
  std::string node_name;  // for messages
  // What is written, for messages: the annotation's key by default. The annotator is also the
  // DRA driver's ResourceSlice publisher (dra/driver.h), whose value is a whole object.
  std::string key = kNvlinkDomainsAnnotation;
  // A value as messages show it; default: as is.
  std::function<std::string(const std::string&)> describe;
  // One line per event, from the annotator's thread; default: stderr.
  std::function<void(absl::string_view)> log;
};

class NodeAnnotator {
 public:
  // `clock` must outlive the annotator.
  NodeAnnotator(NodePatcher patch, Clock& clock, NodeAnnotatorOptions options);
  ~NodeAnnotator();
  NodeAnnotator(const NodeAnnotator&) = delete;
  NodeAnnotator& operator=(const NodeAnnotator&) = delete;

  void Start();
  // Returns after the patch in flight, if any. Idempotent.
  void Stop();
  // The value wanted now; never blocks on the API.
  void Set(const NvLinkDomains& domains);

  // The value the Node is known to carry (written by the last patch; nullopt before the first
  // success and after a failure), and patches tried so far.
  // Writes the value again soon even though it was written (someone else deleted or changed
  // what was written: kubelet wipes a node's ResourceSlices when it starts). Thread-safe.
  void Resync();
  std::optional<std::string> written() const;
  int attempts() const;

 private:
  void Run();
  void Log(absl::string_view line) const;

  const NodePatcher patch_;
  Clock& clock_;
  const NodeAnnotatorOptions options_;
  std::thread thread_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;  // Set or Stop since the thread last looked
  bool forced_ ABSL_GUARDED_BY(mu_) = false;  // Resync since the thread last wrote
  std::optional<std::string> desired_ ABSL_GUARDED_BY(mu_);
  bool desired_complete_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<std::string> written_ ABSL_GUARDED_BY(mu_);
  absl::Time retry_due_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time resync_due_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tessera::deviceplugin
