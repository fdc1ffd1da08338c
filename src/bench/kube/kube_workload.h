// The Kubernetes side of `tessera bench kube` (kube_bench.h): the objects it creates, their
// creation through the API on many threads, the Pod watch that timestamps bindings, and the raw
// binding rate of the apiserver.
//
// Objects: Nodes `node-NNNNN` (labels tessera.dev/rack=rack-NNN per --rack-size nodes and
// nvidia.com/gpu.product; allocatable nvidia.com/gpu, cpu, memory, pods; Ready), single-GPU Pods
// `single-NNNNN`, and gangs `gang-NNNN`: a KEP-4671 PodGroup (scheduling.k8s.io/v1alpha3, gang
// minCount = its size) and its Pods `gang-NNNN-M`, which name it in spec.schedulingGroup. Each Pod
// asks 4 CPUs and 32 GiB per GPU (limits = requests).
// Thread safety: the functions may run at once on different clients; BindingWatch's methods from
// any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kube/informer.h"
#include "kube/rest_client.h"

namespace tessera::bench {

struct KubeBenchShape {
  int nodes = 5000;
  int rack_size = 32;
  int gpus_per_node = 8;
  int single = 8000;
  int gangs = 500;
  int gang_size = 8;
  int gpus_per_gang_pod = 8;

  int64_t gpus() const { return int64_t{nodes} * gpus_per_node; }
  int64_t gpus_asked() const { return single + int64_t{gangs} * gang_size * gpus_per_gang_pod; }
  int pods() const { return single + gangs * gang_size; }
};

// Runs fn(i) for every i in [0, n) on `threads` threads. The first error stops the calls not yet
// started and is returned (with how many failed).
absl::Status ParallelFor(int n, int threads, const std::function<absl::Status(int)>& fn);

std::string BenchNodeName(int i);
std::string SinglePodName(int i);
std::string GangName(int g);
std::string GangPodName(int g, int m);

kube::Json BenchNode(const KubeBenchShape& s, int i);
// A Pod asking `gpus` GPUs of `scheduler`, in the KEP-4671 PodGroup `pod_group` unless "".
kube::Json BenchPod(const std::string& name, const std::string& scheduler, int gpus,
                    const std::string& pod_group);
kube::Json BenchPodGroup(const std::string& name, int min_count);

// Creates the shape's Nodes and clears the taint the apiserver puts on a new Node until a kubelet
// reports (a merge patch {"spec":{"taints":null}}; no kubelet runs here).
absl::Status CreateNodes(kube::RestClient& c, const KubeBenchShape& s, int threads);

// A namespace named `name`.
absl::Status CreateNamespace(kube::RestClient& c, const std::string& name);

// When each piece of work was sent (just before its create request left this process).
struct CreatedWork {
  std::vector<absl::Time> single_sent;     // by single Pod index
  std::vector<absl::Time> gang_sent;       // by gang: its PodGroup's create
  std::vector<absl::Time> gang_last_sent;  // by gang: its last member's create
  absl::Time first = absl::InfiniteFuture(), last = absl::InfinitePast();
  int errors = 0;
  std::string first_error;
};

// How CreateWork sends the work.
struct WorkPacing {
  // Work items (a single Pod, or a gang) started per second, in order; 0: as fast as `threads`
  // threads create them.
  double items_per_s = 0;
  // A gang's members created at once after its PodGroup (as a Job controller creates a batch),
  // rather than one after the other on the gang's thread.
  bool members_at_once = false;
};

// Creates the singles and the gangs (each gang's PodGroup, then its members) in a shuffled order
// (seeded) on `threads` threads, all in `ns`, for `scheduler`.
CreatedWork CreateWork(kube::RestClient& c, const std::string& ns, const KubeBenchShape& s,
                       const std::string& scheduler, int threads, uint64_t seed,
                       WorkPacing pacing = {});

// Deletes every Pod and KEP-4671 PodGroup of `ns` at once (grace period 0: no kubelet runs) and
// waits until a list of its Pods is empty.
absl::Status DeleteWork(kube::RestClient& c, const std::string& ns, absl::Duration timeout);

// Watches the Pods of one namespace and notes when each was first seen with spec.nodeName.
class BindingWatch {
 public:
  // Starts the watch and waits for its first list (false from synced() if it did not come).
  BindingWatch(kube::RestClient& c, const std::string& ns);
  ~BindingWatch();
  BindingWatch(const BindingWatch&) = delete;
  BindingWatch& operator=(const BindingWatch&) = delete;

  bool synced() const { return synced_; }
  int bound() const;
  // Waits until `n` Pods are bound, `deadline` passes, or no Pod was bound for `idle` while
  // `done_creating` says creation is over. Returns how many are bound.
  int WaitBound(int n, absl::Time deadline, absl::Duration idle,
                const std::function<bool()>& done_creating);
  // Pod name -> when first seen bound (InfinitePast: never).
  absl::Time BoundAt(const std::string& pod) const;
  absl::Time last_bound() const;
  absl::Time first_bound() const;
  // Bound Pods whose PodScheduled condition says False (a stale "unschedulable" written after
  // the binding); `example` gets one of them, "pod: message".
  int BoundButUnschedulable(std::string* example) const;

 private:
  void Saw(const kube::ObjectPtr& o);
  std::unique_ptr<kube::Informer> inf_;
  bool synced_ = false;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, absl::Time> bound_at_ ABSL_GUARDED_BY(mu_);
  absl::Time first_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

// The apiserver's own binding rate: `pods` Pods that no scheduler takes (schedulerName
// none-such) are created in `ns` (not timed), then each is bound (POST pods/NAME/binding) to the
// bench's nodes in turn from `threads` threads as fast as the API answers. Bindings per second.
absl::StatusOr<double> RawBindingRate(kube::RestClient& c, const std::string& ns, int pods,
                                      int nodes, int threads);

}  // namespace tessera::bench
