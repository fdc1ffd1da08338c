// The controller's garbage collection of Event objects (Kubernetes keeps
// events for an hour for the same reason: every transition writes one, and
// a busy fleet would otherwise grow its store without bound).
#include <algorithm>
#include <vector>

#include "controller/controller_internal.h"
#include "controller/scheduling_controller.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

void SchedulingController::CollectEvents() {
  if (options_.event_ttl <= absl::ZeroDuration()) return;
  const absl::Time now = clock_.Now();
  if (now < next_event_gc_) return;
  // One page per step, so a pass over many events never stalls scheduling.
  store::ListOptions lo;
  lo.limit = 1000;
  lo.continue_after = event_gc_cursor_;
  const absl::Duration period =
      std::clamp(options_.event_ttl / 10, absl::Seconds(10), absl::Minutes(10));
  absl::StatusOr<store::ListResult> page = store_.List(kEventsPrefix, lo);
  if (!page.ok()) {
    options_.log.Warn("event collection: list failed",
                      {{"error", std::string(page.status().message())}});
    next_event_gc_ = now + period;
    return;
  }
  std::vector<store::Op> ops;
  for (const store::KeyValue& kv : page->kvs) {
    absl::StatusOr<Json> ev = ParseStored(kv.value);
    if (!ev.ok() || !ev->contains("metadata")) continue;
    absl::Time created;
    if (!ParseTimestamp(Str((*ev)["metadata"], "creationTimestamp"), &created)) continue;
    if (now - created >= options_.event_ttl)
      ops.push_back(store::Op::Delete(kv.key, kv.mod_revision));
  }
  if (!ops.empty()) {
    int64_t deleted = static_cast<int64_t>(ops.size());
    if (!store_.Txn(ops).ok()) {
      // One of them changed or went away meanwhile: delete the rest one by one.
      deleted = 0;
      for (const store::Op& op : ops) deleted += store_.Txn({op}).ok() ? 1 : 0;
    }
    stats_.events_collected += deleted;
  }
  if (page->more) {
    event_gc_cursor_ = page->next_key;
  } else {
    event_gc_cursor_.clear();
    next_event_gc_ = now + period;
  }
}

}  // namespace tessera::controller
