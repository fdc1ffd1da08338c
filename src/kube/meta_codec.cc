// ObjectMeta and time codecs (codec.h).
#include "absl/strings/str_cat.h"
#include "kube/codec.h"
#include "kube/field_reader.h"

namespace tessera::kube {

using internal::FieldReader;
using internal::SetOrErase;

std::string ObjectKey(const ObjectMeta& m) {
  return m.ns.empty() ? m.name : absl::StrCat(m.ns, "/", m.name);
}

namespace internal {

// Reads metadata into `m`, errors under "metadata.".
void ReadMeta(FieldReader& r, const Json& j, ObjectMeta& m) {
  const std::string p = "metadata";
  const Json* md = r.Object(j, "metadata", "");
  if (md == nullptr) return;
  m.name = r.Str(*md, "name", p);
  m.generate_name = r.Str(*md, "generateName", p);
  m.ns = r.Str(*md, "namespace", p);
  m.uid = r.Str(*md, "uid", p);
  m.resource_version = r.Str(*md, "resourceVersion", p);
  m.generation = r.Int(*md, "generation", p);
  m.creation_timestamp = r.Str(*md, "creationTimestamp", p);
  m.deletion_timestamp = r.OptStr(*md, "deletionTimestamp", p);
  m.labels = r.StrMap(*md, "labels", p);
  m.annotations = r.StrMap(*md, "annotations", p);
  m.finalizers = r.StrList(*md, "finalizers", p);
  if (const Json* refs = r.Array(*md, "ownerReferences", p)) {
    for (size_t i = 0; i < refs->size(); ++i) {
      const std::string rp = FieldReader::Index(p + ".ownerReferences", i);
      const Json& o = (*refs)[i];
      OwnerReference ref;
      ref.api_version = r.Str(o, "apiVersion", rp);
      ref.kind = r.Str(o, "kind", rp);
      ref.name = r.Str(o, "name", rp);
      ref.uid = r.Str(o, "uid", rp);
      ref.controller = r.Bool(o, "controller", rp);
      ref.block_owner_deletion = r.Bool(o, "blockOwnerDeletion", rp);
      m.owner_references.push_back(std::move(ref));
    }
  }
}

Json StartEncode(const Json& raw, const char* api_version, const char* kind, const ObjectMeta& m) {
  Json j = raw.is_object() ? raw : Json::object();
  j["apiVersion"] = api_version;
  j["kind"] = kind;
  EncodeObjectMeta(m, j["metadata"]);
  return j;
}

}  // namespace internal

absl::StatusOr<ObjectMeta> DecodeObjectMeta(const Json& metadata) {
  FieldReader r("ObjectMeta");
  ObjectMeta m;
  internal::ReadMeta(r, Json{{"metadata", metadata}}, m);
  if (!r.ok()) return r.Finish();
  return m;
}

void EncodeObjectMeta(const ObjectMeta& m, Json& md) {
  if (!md.is_object()) md = Json::object();
  SetOrErase(md, "name", m.name, m.name.empty());
  SetOrErase(md, "generateName", m.generate_name, m.generate_name.empty());
  SetOrErase(md, "namespace", m.ns, m.ns.empty());
  SetOrErase(md, "uid", m.uid, m.uid.empty());
  SetOrErase(md, "resourceVersion", m.resource_version, m.resource_version.empty());
  SetOrErase(md, "generation", m.generation, m.generation == 0);
  SetOrErase(md, "creationTimestamp", m.creation_timestamp, m.creation_timestamp.empty());
  SetOrErase(md, "deletionTimestamp", m.deletion_timestamp.value_or(""),
             !m.deletion_timestamp.has_value());
  SetOrErase(md, "labels", internal::EncodeStrMap(m.labels), m.labels.empty());
  SetOrErase(md, "annotations", internal::EncodeStrMap(m.annotations), m.annotations.empty());
  SetOrErase(md, "finalizers", m.finalizers, m.finalizers.empty());
  Json refs = Json::array();
  for (const OwnerReference& o : m.owner_references) {
    Json ref = {{"apiVersion", o.api_version}, {"kind", o.kind}, {"name", o.name}, {"uid", o.uid}};
    if (o.controller) ref["controller"] = true;
    if (o.block_owner_deletion) ref["blockOwnerDeletion"] = true;
    refs.push_back(std::move(ref));
  }
  SetOrErase(md, "ownerReferences", std::move(refs), m.owner_references.empty());
}

std::string FormatMicroTime(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", t, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseApiTime(const std::string& s) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, s, &t, &err)) {
    return absl::InvalidArgumentError(absl::StrCat("time \"", s, "\": ", err));
  }
  return t;
}

}  // namespace tessera::kube
