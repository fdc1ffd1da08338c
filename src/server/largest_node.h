// The edge's "GPUs per member within the fleet's largest node" limit (docs/api.md, "Limits").
//
// A gang member runs on one node, so a member asking more whole GPUs than any registered Node
// has can never be placed: the job would wait forever behind an Unschedulable event. Such a
// TrainingJob or InferenceService is refused at create and update with 422, each offending
// field named with the limit and the node that sets it, and nothing stored.
//
// Algorithm: the largest node (most GPUs in spec: len(gpus) or gpuCount) is read from the store
// the first time it is needed; then each API write of a Node updates it in O(1) (a larger or
// equal node takes its place; the largest node shrinking or deleted makes the next check read
// the fleet again), so 12,500 agents registering cost no re-reads. A check is a comparison
// per group. With no Node
// registered yet there is no fleet to compare with and nothing is refused (the static
// kMaxGpusPerNode of the schema still applies), so jobs may be submitted before the nodes.
// Node writes outside the API (heartbeats) change status, never capacity.
//
// Thread safety: all methods may be called from any request thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "api/kinds.h"
#include "api/object_codec.h"
#include "store/store.h"

namespace tessera::server {

class LargestNode {
 public:
  explicit LargestNode(store::Store& store) : store_(store) {}

  // The fields of `obj` (a validated object of `kind`) asking more GPUs per member than the
  // largest registered node has; empty when none, or when `kind` has no members.
  // `path` prefixes the field names ("items[3]" in a batch; empty otherwise).
  absl::StatusOr<std::vector<api::FieldError>> Check(const api::KindInfo& kind,
                                                     const api::Json& obj, std::string_view path);
  // Call after every successful API write of a Node: `spec` is the stored spec, or null when
  // the node was deleted.
  void NodeWritten(const std::string& name, const api::Json* spec);

 private:
  store::Store& store_;
  // Held while the fleet is read, so a concurrent NodeWritten applies after it.
  absl::Mutex mu_;
  bool known_ ABSL_GUARDED_BY(mu_) = false;
  int64_t gpus_ ABSL_GUARDED_BY(mu_) = 0;  // 0: no node registered
  std::string node_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::server
