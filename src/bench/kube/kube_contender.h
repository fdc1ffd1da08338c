// The schedulers `tessera bench kube` measures, behind one interface: Tessera's
// kubesched::KubeScheduler in this process (as `tessera scheduler` runs it: every plugin, no
// leader election) and the bed's kube-scheduler as a child process (a KubeSchedulerConfiguration
// with the same client QPS/burst, NodeResourcesFit scored on nvidia.com/gpu, KEP-4671 gangs).
// A contender is started once and stopped once: each phase of the bench makes a new one, so a
// restarted scheduler rebuilds from the API as a real restart does.
// Thread safety: one thread drives a contender.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kube/rest_client.h"
#include "kube/testing/kube_bed.h"
#include "nlohmann/json.hpp"

namespace tessera::bench {

struct ContenderOptions {
  double qps = 5000;  // each scheduler's client QPS and burst
  int burst = 5000;
  int api_writers = 64;  // Tessera's concurrent API writes (tessera scheduler's default)
  std::string kube_scoring = "MostAllocated";
};

class Contender {
 public:
  virtual ~Contender() = default;
  // The schedulerName its Pods carry.
  virtual std::string pod_scheduler_name() const = 0;
  // Tessera: returns once its caches are filled and it schedules; kube-scheduler: once the child
  // runs (it schedules after its own sync).
  virtual absl::Status Start() = 0;
  // OK while it runs.
  virtual absl::Status Alive() = 0;
  // What the scheduler says of itself (Tessera: cycles, bindings, its cycles' time).
  virtual nlohmann::json Stats() const = 0;
  // Idempotent; the destructor stops it too.
  virtual void Stop() = 0;
};

constexpr char kTesseraContender[] = "tessera";
constexpr char kKubeSchedulerContender[] = "kube-scheduler";

// A client of the bed's admin (group system:masters, which API Priority and Fairness exempts
// from the apiserver's in-flight limits).
absl::StatusOr<std::unique_ptr<kube::RestClient>> AdminClient(const testing::KubeBed& bed,
                                                              kube::RestOptions ro);

// `which` is kTesseraContender or kKubeSchedulerContender. `bed` must outlive the contender.
std::unique_ptr<Contender> MakeContender(const std::string& which, const ContenderOptions& o,
                                         testing::KubeBed& bed);

// Creates a Pod asking 10m CPU in namespace `ns` (created if missing) for `s` and waits until it
// is bound, then deletes it: the contender is up with its caches filled. (Tessera refuses a Pod
// that asks nothing at all.)
absl::Status Probe(kube::RestClient& c, Contender& s, const std::string& ns,
                   absl::Duration timeout);

}  // namespace tessera::bench
