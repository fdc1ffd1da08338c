#include "federation/copy_sync.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "api/kinds.h"
#include "federation/json_fields.h"

namespace tessera::federation {
namespace {

Json ObjectOr(const Json& v) { return v.is_object() ? v : Json::object(); }

// FNV-1a, 64 bits: stable across builds and hosts (the digest is stored in
// members and compared by later hub processes), unlike std::hash.
std::string Digest(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return absl::StrCat(absl::Hex(h, absl::kZeroPad16));
}

// The copy's labels, annotations (digest aside) and spec: what the digest covers.
Json Content(const Json& copy) {
  const Json& meta = Field(copy, "metadata");
  Json annotations = ObjectOr(Field(meta, "annotations"));
  annotations.erase(kSpecHashAnnotation);
  // Each cluster's API server records who created its object: the member's says the hub did.
  annotations.erase(api::kSubmittedByAnnotation);
  return {{"labels", ObjectOr(Field(meta, "labels"))},
          {"annotations", annotations},
          {"spec", Field(copy, "spec")}};
}

}  // namespace

Json CopyOf(const Json& obj, const std::string& hub, const std::string& uid) {
  const Json& meta = Field(obj, "metadata");
  Json labels = ObjectOr(Field(meta, "labels"));
  Json annotations = ObjectOr(Field(meta, "annotations"));
  labels[kHubLabel] = hub;
  annotations[kOriginAnnotation] = uid;
  Json copy = {{"apiVersion", Str(obj, "apiVersion")},
               {"kind", Str(obj, "kind")},
               {"metadata",
                {{"name", Str(meta, "name")},
                 {"namespace", Str(meta, "namespace")},
                 {"labels", labels},
                 {"annotations", annotations}}},
               {"spec", Field(obj, "spec")}};
  copy["metadata"]["annotations"][kSpecHashAnnotation] = Digest(Content(copy).dump());
  return copy;
}

std::string OriginOf(const Json& copy) {
  return Str(Field(Field(copy, "metadata"), "annotations"), kOriginAnnotation);
}

std::string SpecHashOf(const Json& copy) {
  return Str(Field(Field(copy, "metadata"), "annotations"), kSpecHashAnnotation);
}

SyncPlan PlanSync(const Json& want, const Json& copy, const Json& hub_status) {
  const std::string hash = SpecHashOf(want);
  const Json& record = Field(hub_status, "specSync");
  SyncPlan plan;
  if (SpecHashOf(copy) == hash) {
    // In step; a record of another version, or of a refusal of this one
    // (the copy got it since, e.g. dispatched again), is stale.
    plan.clear_record =
        record.is_object() && (Str(record, "hash") != hash || Str(record, "state") == "Refused");
    return plan;
  }
  // Refused once: not again until the hub object changes.
  plan.push = !(Str(record, "state") == "Refused" && Str(record, "hash") == hash);
  return plan;
}

std::vector<std::string> ChangedFields(const Json& copy, const Json& want) {
  const Json have = Content(copy);
  const Json next = Content(want);
  std::vector<std::string> changed;
  for (const char* m : {"labels", "annotations"}) {
    if (have[m] != next[m]) changed.push_back(absl::StrCat("metadata.", m));
  }
  const Json a = ObjectOr(have["spec"]);
  const Json b = ObjectOr(next["spec"]);
  // Keys of both, in order (nlohmann objects iterate sorted).
  Json keys = Json::object();
  for (auto it = a.begin(); it != a.end(); ++it) keys[it.key()] = true;
  for (auto it = b.begin(); it != b.end(); ++it) keys[it.key()] = true;
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    if (Field(a, it.key().c_str()) != Field(b, it.key().c_str())) {
      changed.push_back(absl::StrCat("spec.", it.key()));
    }
  }
  return changed;
}

std::vector<std::string> DeferredWhileBound(const std::vector<std::string>& changed) {
  std::vector<std::string> deferred;
  for (const std::string& f : changed) {
    if (f.rfind("spec.", 0) == 0 && f != "spec.suspend") deferred.push_back(f);
  }
  return deferred;
}

}  // namespace tessera::federation
