#include "controller/events.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "controller/controller_internal.h"
#include "controller/scheduling_controller.h"
#include "store/txn_runs.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

Json EventFor(const Json& obj, absl::string_view tag, const EventNote& note, absl::Time now) {
  const Json& meta = obj.contains("metadata") ? obj["metadata"] : Json::object();
  const std::string name = Str(meta, "name");
  const std::string ns = Str(meta, "namespace", "default");
  std::string prefix = name.substr(0, 40);
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  Json involved = {{"kind", Str(obj, "kind")}, {"name", name}};
  if (meta.contains("namespace")) involved["namespace"] = ns;
  if (meta.contains("uid") && meta["uid"].is_string()) involved["uid"] = meta["uid"];
  const std::string at = Timestamp(now);
  return {{"apiVersion", kApiVersion},
          {"kind", "Event"},
          {"metadata",
           {{"name", absl::StrCat(prefix, "-", tag)},
            {"namespace", ns},
            {"creationTimestamp", at},
            {"labels",
             {{"involved-kind", absl::AsciiStrToLower(Str(obj, "kind"))},
              {"involved-name", name.substr(0, 63)}}}}},
          {"spec",
           {{"involvedObject", involved},
            {"reason", note.reason},
            {"message", note.message.substr(0, 4096)},
            {"type", note.warning ? "Warning" : "Normal"},
            {"eventTime", at}}},
          {"status", {{"phase", "Recorded"}}}};
}

int64_t EventCollector::Step(absl::Time now) {
  if (ttl_ <= absl::ZeroDuration() || now < next_) return 0;
  store::ListOptions lo;
  lo.limit = 1000;
  lo.continue_after = cursor_;
  const absl::Duration period = std::clamp(ttl_ / 10, absl::Seconds(10), absl::Minutes(10));
  absl::StatusOr<store::ListResult> page = store_.List(kEventsPrefix, lo);
  if (!page.ok()) {
    log_.Warn("event collection: list failed", {{"error", std::string(page.status().message())}});
    next_ = now + period;
    return 0;
  }
  std::vector<store::Op> ops;
  for (const store::KeyValue& kv : page->kvs) {
    absl::StatusOr<Json> ev = ParseStored(kv.value);
    if (!ev.ok() || !ev->contains("metadata")) continue;
    absl::Time created;
    if (!ParseTimestamp(Str((*ev)["metadata"], "creationTimestamp"), &created)) continue;
    if (now - created >= ttl_) ops.push_back(store::Op::Delete(kv.key, kv.mod_revision));
  }
  int64_t deleted = 0;
  size_t begin = 0;
  // As many per Txn as the store takes (etcd: 127).
  for (size_t end : store::TxnRuns(std::vector<size_t>(ops.size(), 1), store_.MaxTxnOps())) {
    std::vector<store::Op> run(ops.begin() + static_cast<ptrdiff_t>(begin),
                               ops.begin() + static_cast<ptrdiff_t>(end));
    if (store_.Txn(run).ok()) {
      deleted += static_cast<int64_t>(run.size());
    } else {
      // One of them changed or went away meanwhile: delete the rest one by one.
      for (const store::Op& op : run) deleted += store_.Txn({op}).ok() ? 1 : 0;
    }
    begin = end;
  }
  if (page->more) {
    cursor_ = page->next_key;
  } else {
    cursor_.clear();
    next_ = now + period;
  }
  return deleted;
}

// --- The controller's Events (one per decision it writes) ------------------------------------

Json SchedulingController::EventObject(const Json& obj, int64_t base, const Change& why) const {
  return EventFor(obj, absl::StrCat(absl::Hex(base), "-", absl::Hex(event_seq_ & 0xfff)),
                  {why.reason, why.message, why.warning}, clock_.Now());
}

void SchedulingController::RecordEvent(const Json& obj, int64_t rev, const Change& why) {
  store::Op op = EventOp(obj, rev, why);
  absl::StatusOr<int64_t> r = store_.Put(op.key, op.value);
  if (!r.ok()) {
    options_.log.Error("event not written",
                       {{"key", op.key}, {"error", std::string(r.status().message())}});
  }
  LogChange(obj, why);
}

void SchedulingController::LogChange(const Json& obj, const Change& why) const {
  if (why.reason.empty()) return;
  const Json& meta = obj["metadata"];
  const std::string kind = Str(obj, "kind");
  std::vector<obs::LogField> f;
  f.reserve(why.fields.size() + 4);
  if (kind == "Node") {
    f.emplace_back("node", Str(meta, "name"));
  } else {
    f.emplace_back("job", Str(meta, "name"));
    f.emplace_back("namespace", Str(meta, "namespace", "default"));
    f.emplace_back("kind", kind);
  }
  f.emplace_back("reason", why.reason);
  f.insert(f.end(), why.fields.begin(), why.fields.end());
  options_.log.Log(why.warning ? obs::LogLevel::kWarn : obs::LogLevel::kInfo, why.message, f);
}

}  // namespace tessera::controller
