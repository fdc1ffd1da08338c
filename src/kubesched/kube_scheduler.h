// KubeScheduler: the scheduling core (sched::QueueManager over a sched::ClusterState, the same
// code the standalone server runs) scheduling Kubernetes Pods through the Kubernetes API.
//
// Algorithm (one loop thread owns every piece of scheduling state):
//  1. Informers (list + watch) on Pods, Nodes, both PodGroup APIs and tessera.dev Queues note
//     the keys that changed in an inbox and wake the loop; nothing else runs on their threads.
//  2. The loop reads each changed object's latest state from the informer caches
//     (level-triggered, so repeated or coalesced events are harmless) and brings the model to it:
//     - a Node becomes a model::Node (translate.h) in the ClusterState: added, cordoned, rebuilt
//       with the work it runs when its capacity or labels change, removed;
//     - a Pod bound by anyone and not terminal occupies its node (its requests; GPUs it was given
//       by Tessera's annotation, else the lowest free ones); Pods Tessera bound are its queues'
//       running jobs, rebuilt from their annotations when the scheduler (re)starts;
//     - a pending Pod whose schedulerName is ours joins a job: a Pod alone, or the gang of its
//       PodGroup once at least minMember of its Pods exist (each Pod one member group, so members
//       may differ). The job is submitted to the queue of its `tessera.dev/queue` label; a job
//       whose queue does not exist is held with a Warning Event, never run outside a quota.
//  3. QueueManager::Cycle places what fits, all or nothing per gang, in queue order (priority,
//     fair share, backfill around the head-of-line reservation). Each placed member is bound
//     through pods/binding on the ApiWriter pool (many in flight), with its job and GPU indices
//     as annotations. A job that waits gets PodScheduled=False (reason Unschedulable, message
//     "0/N nodes are available: <why>") and one FailedScheduling Event per reason change.
//  4. Preemption (the queue manager's plan: lower priority in the queue, reclaim of borrowed
//     capacity; gang-aware, preferring victims whose last checkpoint is recent, from the Pod
//     annotation tessera.dev/last-checkpoint): each victim Pod is evicted through the Eviction
//     API (PodDisruptionBudgets apply) with the plan's grace period, and gets a Preempted Event.
//     The preemptor runs once every victim Pod is gone. A victim whose eviction is refused keeps
//     running: at the plan's deadline its Pods are counted as bound Pods of nobody's, so the
//     preemptor never runs on capacity that is still in use; it waits and may plan again.
// A Pod that ends (Succeeded, Failed, deleted) returns its resources; a gang's return when its
// last member ends.
// Thread safety: Start and Stop from one thread; stats() from any.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/rest_client.h"
#include "kubesched/translate.h"
#include "metrics/registry.h"
#include "obs/log.h"
#include "sched/queue/queue_manager.h"

namespace tessera::kubesched {

struct KubeSchedulerOptions {
  std::string scheduler_name = "tessera";
  TopologyLabels labels;
  // The base queue configuration: profile, priority classes, preemption policy, queues of no
  // Queue object.
  sched::QueueManagerConfig queues;
  // Concurrent API writes (bindings, status, Events). Each write waits on the apiserver and
  // etcd, so throughput follows concurrency until the apiserver's CPU is spent: on the 2-core VM,
  // 5,000 nodes and 12,000 Pods, 16 writers left Pods waiting 25 s (p50), 64 writers 6 s.
  int api_writers = 64;
  std::string identity = "tessera-scheduler";  // Events' reportingInstance
  absl::Duration sync_timeout = absl::Seconds(60);
  // How often an API not served at start (the PodGroup APIs, Queue, resource.k8s.io/v1) is
  // looked for again: CRDs installed after the scheduler are watched from then on.
  absl::Duration api_rediscovery = absl::Seconds(30);
  obs::Logger log;
};

struct KubeSchedulerStats {
  int64_t cycles = 0;
  int64_t bound = 0;        // bindings the API accepted
  int64_t bind_errors = 0;  // bindings it refused (after retries)
  int64_t pending_jobs = 0;
  int64_t nodes = 0;
  int64_t foreign_pods = 0;       // Pods bound by others, occupying nodes
  int64_t unaccounted_pods = 0;   // bound Pods that did not fit the model (overcommitted nodes)
  int64_t evictions = 0;          // victim Pods the Eviction API accepted
  int64_t evictions_refused = 0;  // ... and refused (a PodDisruptionBudget, say)
};

class KubeScheduler {
 public:
  // `client`, `clock` and `registry` are borrowed and must outlive the scheduler. Declares the
  // scheduler's metrics in `registry` (kube-scheduler's names where the concept is the same).
  static absl::StatusOr<std::unique_ptr<KubeScheduler>> Create(kube::RestClient& client,
                                                               const Clock& clock,
                                                               metrics::Registry& registry,
                                                               KubeSchedulerOptions options);
  ~KubeScheduler();

  // Starts the informers, waits for their first lists (sync_timeout), rebuilds what is bound,
  // then schedules on its own thread until Stop. Unavailable when the caches do not fill in time.
  absl::Status Start();
  // Stops scheduling, the informers and the writers (finishing writes in flight); idempotent.
  void Stop();

  KubeSchedulerStats stats() const;
  // Waits until every change noted so far is processed and every API write it caused has an
  // answer (a quiet point, for tests and benchmarks); false after `timeout`.
  bool Settle(absl::Duration timeout);

  class Impl;

 private:
  explicit KubeScheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::kubesched
