#include "operator/json_fields.h"

#include "absl/strings/numbers.h"

namespace tessera::op {

const Json& Meta(const Json& obj) { return Sub(obj, "metadata"); }

std::string Label(const Json& obj, const char* key) { return StrOr(Sub(Meta(obj), "labels"), key); }

std::string Annotation(const Json& obj, const char* key) {
  return StrOr(Sub(Meta(obj), "annotations"), key);
}

bool Deleting(const Json& obj) { return Meta(obj).contains("deletionTimestamp"); }

int64_t IntLabel(const Json& obj, const char* key, int64_t dflt) {
  int64_t v = 0;
  return absl::SimpleAtoi(Label(obj, key), &v) ? v : dflt;
}

Json ControllerReference(const Json& owner, const std::string& kind) {
  return {{"apiVersion", owner.value("apiVersion", "tessera.dev/v1")},
          {"kind", kind},
          {"name", StrOr(Meta(owner), "name")},
          {"uid", StrOr(Meta(owner), "uid")},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

Json EnvVar(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

}  // namespace tessera::op
