#include "controller/events.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "controller/controller_internal.h"

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
  int64_t deleted = static_cast<int64_t>(ops.size());
  if (!ops.empty() && !store_.Txn(ops).ok()) {
    // One of them changed or went away meanwhile: delete the rest one by one.
    deleted = 0;
    for (const store::Op& op : ops) deleted += store_.Txn({op}).ok() ? 1 : 0;
  }
  if (page->more) {
    cursor_ = page->next_key;
  } else {
    cursor_.clear();
    next_ = now + period;
  }
  return deleted;
}

}  // namespace tessera::controller
