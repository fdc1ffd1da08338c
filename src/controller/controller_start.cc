// SchedulingController::Start: the controller's memory rebuilt from the store, as after a
// restart or when the store's history was compacted past the controller's revision: every
// priority class, queue, node, GPUPool and job read once, stored placements assumed again,
// pending admissions and member-reported phases written, each job's newest Ready checkpoint
// noted. Nodes and jobs, the bulk of it, are parsed on a second thread (ReadAheadParser) while
// this one rebuilds from them; `bench restart` times it (src/bench/restart).
#include <limits>
#include <vector>

#include "common/status_macros.h"
#include "controller/controller_internal.h"
#include "controller/queue_codec.h"
#include "controller/read_ahead_parser.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

absl::Status SchedulingController::ListPrefix(const char* prefix, int64_t* revision,
                                              std::vector<store::KeyValue>* out) {
  store::ListOptions opts;
  opts.limit = options_.page;
  while (true) {
    ASSIGN_OR_RETURN(store::ListResult page, store_.List(prefix, opts));
    *revision = std::min(*revision, page.revision);
    for (store::KeyValue& kv : page.kvs) out->push_back(std::move(kv));
    if (!page.more) return absl::OkStatus();
    opts.continue_after = page.next_key;
  }
}

absl::Status SchedulingController::Start() {
  const absl::Time t0 = absl::Now();
  stats_.start_read_time = absl::ZeroDuration();
  Reset();
  int64_t rev = std::numeric_limits<int64_t>::max();
  std::vector<store::KeyValue> kvs;
  // Reads one kind, timing the store's part of the restart.
  auto read = [&](const char* prefix, int64_t* revision) {
    const absl::Time r0 = absl::Now();
    absl::Status st = ListPrefix(prefix, revision, &kvs);
    stats_.start_read_time += absl::Now() - r0;
    return st;
  };
  RETURN_IF_ERROR(read(kPriorityClassesPrefix, &rev));
  for (const store::KeyValue& kv : kvs) {
    if (absl::StatusOr<Json> obj = ParseStored(kv.value); obj.ok()) OnPriorityClass(*obj, false);
  }
  kvs.clear();
  RETURN_IF_ERROR(read(kQueuesPrefix, &rev));
  for (const store::KeyValue& kv : kvs) {
    if (absl::StatusOr<Json> obj = ParseStored(kv.value); obj.ok()) OnQueue(*obj, false);
  }
  kvs.clear();
  RETURN_IF_ERROR(read(kNodesPrefix, &rev));
  {
    // Nodes and jobs, the bulk of a restart, are parsed on a second thread while this one
    // rebuilds the cluster from them (ReadAheadParser).
    ReadAheadParser parsed(kvs);
    for (const store::KeyValue& kv : kvs) {
      if (const absl::StatusOr<Json>& obj = parsed.Next(); obj.ok()) {
        OnNodePut(kv.key, *obj, kv.mod_revision, /*at_start=*/true);
        if (auto n = nodes_.find(kv.key); n != nodes_.end()) NotePoolFacts(*n->second, *obj);
      }
    }
  }
  kvs.clear();
  // GPUPools before the jobs: the queues they confine are part of each job's admission.
  RETURN_IF_ERROR(read(kGpuPoolsPrefix, &rev));
  for (const store::KeyValue& kv : kvs) {
    if (absl::StatusOr<Json> obj = ParseStored(kv.value); obj.ok()) OnPool(kv.key, &*obj);
  }
  InitPoolConfinement();
  kvs.clear();
  RETURN_IF_ERROR(read(kTrainingJobsPrefix, &rev));
  RETURN_IF_ERROR(read(kInferenceServicesPrefix, &rev));
  started_ = true;
  revision_ = rev == std::numeric_limits<int64_t>::max() ? 0 : rev;
  {
    ReadAheadParser parsed(kvs);
    for (const store::KeyValue& kv : kvs) {
      if (const absl::StatusOr<Json>& obj = parsed.Next(); obj.ok()) {
        OnJobPut(kv.key, *obj, kv.mod_revision, /*at_start=*/true);
      }
    }
  }
  WritePhases();
  WriteAdmissions();
  // Each restored job's newest Ready checkpoint, so the preemption search
  // weighs the work a victim would lose as the previous controller did.
  kvs.clear();
  int64_t ckpt_rev = std::numeric_limits<int64_t>::max();
  RETURN_IF_ERROR(read(kCheckpointsPrefix, &ckpt_rev));
  for (const store::KeyValue& kv : kvs) {
    if (absl::StatusOr<Json> obj = ParseStored(kv.value); obj.ok()) OnCheckpoint(*obj);
  }
  stats_.start_time = absl::Now() - t0;
  return absl::OkStatus();
}

}  // namespace tessera::controller
