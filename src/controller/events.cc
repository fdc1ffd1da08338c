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

namespace {

// `s` as a JSON string literal (escaped as nlohmann's dump escapes it).
std::string Quote(absl::string_view s) { return Json(std::string(s)).dump(); }

}  // namespace

store::Op EventPut(const Json& obj, absl::string_view tag, const EventNote& note, absl::Time now) {
  static const Json kNoMeta = Json::object();
  const Json& meta = obj.contains("metadata") ? obj["metadata"] : kNoMeta;
  const std::string name = Str(meta, "name");
  const std::string ns = Str(meta, "namespace", "default");
  const std::string kind = Str(obj, "kind");
  std::string prefix = name.substr(0, 40);
  while (!prefix.empty() && prefix.back() == '-') prefix.pop_back();
  const std::string event_name = absl::StrCat(prefix, "-", tag);
  const std::string at = Quote(Timestamp(now));
  // The stored form, written out: the controller writes one with most of its decisions, and
  // building it as a document to serialize it cost it a tenth of its thread. Keys in sorted
  // order, as ToStored's dump writes them (StoredToApiText relies on it).
  std::string involved = absl::StrCat("{\"kind\":", Quote(kind), ",\"name\":", Quote(name));
  if (meta.contains("namespace")) absl::StrAppend(&involved, ",\"namespace\":", Quote(ns));
  if (meta.contains("uid") && meta["uid"].is_string()) {
    absl::StrAppend(&involved, ",\"uid\":", Quote(meta["uid"].get<std::string>()));
  }
  involved.push_back('}');
  std::string text = absl::StrCat(
      "{\"apiVersion\":", Quote(kApiVersion), ",\"kind\":\"Event\",\"metadata\":{",
      "\"creationTimestamp\":", at,
      ",\"labels\":{\"involved-kind\":", Quote(absl::AsciiStrToLower(kind)),
      ",\"involved-name\":", Quote(name.substr(0, 63)), "},\"name\":", Quote(event_name),
      ",\"namespace\":", Quote(ns), "},\"spec\":{", "\"eventTime\":", at,
      ",\"involvedObject\":", involved, ",\"message\":", Quote(note.message.substr(0, 4096)),
      ",\"reason\":", Quote(note.reason), ",\"type\":", note.warning ? "\"Warning\"" : "\"Normal\"",
      "},\"status\":{\"phase\":\"Recorded\"}}");
  return store::Op::Put(ObjectKey("events", ns, event_name), std::move(text));
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

store::Op SchedulingController::EventOp(const Json& obj, int64_t base, const Change& why) {
  ++event_seq_;
  return EventPut(obj, absl::StrCat(absl::Hex(base), "-", absl::Hex(event_seq_ & 0xfff)),
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
