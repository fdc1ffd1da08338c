#include "server/largest_node.h"

#include "absl/strings/str_cat.h"

namespace tessera::server {

using api::Json;

void LargestNode::NodeWritten(const std::string& name, const Json* spec) {
  absl::MutexLock l(&mu_);
  if (!known_) return;  // the next check reads the fleet, this write included
  const int64_t gpus = spec == nullptr ? -1 : api::NodeGpuCount(*spec);
  if (gpus >= gpus_ && gpus > 0) {
    gpus_ = gpus;
    node_ = name;
  } else if (name == node_) {
    known_ = false;  // the largest shrank or went: another may be the largest now
  }
}

absl::StatusOr<std::vector<api::FieldError>> LargestNode::Check(const api::KindInfo& kind,
                                                                const Json& obj,
                                                                std::string_view path) {
  std::vector<api::FieldError> errors;
  // The members' whole-GPU asks, with their field names.
  std::vector<std::pair<std::string, int64_t>> asks;
  const Json& spec = obj["spec"];
  const std::string prefix =
      path.empty() ? "spec" : absl::StrCat(absl::string_view(path.data(), path.size()), ".spec");
  if (kind.kind == "TrainingJob") {
    const Json& groups = spec["groups"];
    for (size_t i = 0; i < groups.size(); ++i) {
      asks.emplace_back(absl::StrCat(prefix, ".groups[", i, "].gpusPerReplica"),
                        groups[i].value("gpusPerReplica", int64_t{0}));
    }
  } else if (kind.kind == "InferenceService") {
    asks.emplace_back(absl::StrCat(prefix, ".gpusPerReplica"),
                      spec.value("gpusPerReplica", int64_t{0}));
  }
  if (asks.empty()) return errors;
  absl::MutexLock l(&mu_);
  if (!known_) {
    gpus_ = 0;
    node_.clear();
    const api::KindInfo* nodes = api::KindByPlural("nodes");
    store::ListOptions opts;
    for (;;) {
      absl::StatusOr<store::ListResult> page = store_.List(api::StorePrefix(*nodes, ""), opts);
      if (!page.ok()) return page.status();
      for (const store::KeyValue& kv : page->kvs) {
        Json node = Json::parse(kv.value, nullptr, /*allow_exceptions=*/false);
        if (!node.is_object() || !node.contains("spec")) continue;
        const int64_t gpus = api::NodeGpuCount(node["spec"]);
        if (gpus > gpus_) {
          gpus_ = gpus;
          node_ = node["metadata"].value("name", "");
        }
      }
      if (!page->more) break;
      opts.continue_after = page->next_key;
    }
    known_ = true;
  }
  if (gpus_ == 0) return errors;  // no fleet yet
  for (const auto& [field, gpus] : asks) {
    if (gpus <= gpus_) continue;
    errors.push_back({field, absl::StrCat("must be <= ", gpus_,
                                          ", the most GPUs of any node in the fleet (node ", node_,
                                          "): a member runs on one node")});
  }
  return errors;
}

}  // namespace tessera::server
