#include "cli/resources.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tessera::cli {

const std::vector<ResourceInfo>& AllResources() {
  static const std::vector<ResourceInfo>* r = new std::vector<ResourceInfo>{
      {"trainingjobs", "TrainingJob", true, {"jobs", "job", "trainingjob", "tj"}},
      {"inferenceservices", "InferenceService", true, {"inferenceservice", "isvc", "svc"}},
      {"nodes", "Node", false, {"node", "no"}},
      {"queues", "Queue", false, {"queue", "q"}},
      {"clusters", "Cluster", false, {"cluster"}},
      {"priorityclasses", "PriorityClass", false, {"priorityclass", "pc"}},
      {"checkpoints", "Checkpoint", true, {"checkpoint", "ckpt"}},
      {"modelversions", "ModelVersion", true, {"modelversion", "mv"}},
      {"gpupools", "GPUPool", true, {"gpupool", "pools", "pool"}},
      {"resourcequotas", "ResourceQuota", true, {"resourcequota", "quota"}},
      {"events", "Event", true, {"event", "ev"}},
  };
  return *r;
}

const ResourceInfo* FindResource(const std::string& name) {
  const std::string n = absl::AsciiStrToLower(name);
  for (const ResourceInfo& r : AllResources()) {
    if (r.plural == n || absl::AsciiStrToLower(r.kind) == n) return &r;
    for (const std::string& a : r.aliases) {
      if (a == n) return &r;
    }
  }
  return nullptr;
}

const ResourceInfo* ResourceForKind(const std::string& kind) {
  for (const ResourceInfo& r : AllResources()) {
    if (r.kind == kind) return &r;
  }
  return nullptr;
}

std::string CollectionPath(const ResourceInfo& r, const std::string& ns, bool all_namespaces) {
  if (!r.namespaced || all_namespaces) return absl::StrCat("/api/v1/", r.plural);
  return absl::StrCat("/api/v1/namespaces/", ns, "/", r.plural);
}

std::string ItemPath(const ResourceInfo& r, const std::string& ns, const std::string& name) {
  return absl::StrCat(CollectionPath(r, ns, false), "/", name);
}

std::string ObjectPath(const nlohmann::json& obj) {
  const ResourceInfo* r = ResourceForKind(obj.value("kind", ""));
  if (r == nullptr || !obj.contains("metadata")) return "";
  const nlohmann::json& meta = obj["metadata"];
  return ItemPath(*r, meta.value("namespace", ""), meta.value("name", ""));
}

std::string QueryEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

}  // namespace tessera::cli
