#include "api/model_lineage.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;

std::string StrAt(const Json& obj, const char* a, const char* b) {
  if (!obj.is_object()) return "";
  auto x = obj.find(a);
  if (x == obj.end() || !x->is_object()) return "";
  auto y = x->find(b);
  return y != x->end() && y->is_string() ? y->get<std::string>() : "";
}

bool BeingDeleted(const Json& obj) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return false;
  auto it = obj["metadata"].find("deletionTimestamp");
  return it != obj["metadata"].end() && !it->is_null();
}

}  // namespace

std::vector<std::string> ServingInferenceServices(std::string_view mv_name,
                                                  const std::vector<const Json*>& services) {
  std::vector<std::string> out;
  for (const Json* s : services) {
    if (s == nullptr || !s->is_object() || BeingDeleted(*s)) continue;
    if (StrAt(*s, "spec", "modelVersion") != mv_name) continue;
    const std::string phase = StrAt(*s, "status", "phase");
    if (phase == "Succeeded" || phase == "Failed") continue;
    std::string name = StrAt(*s, "metadata", "name");
    if (!name.empty()) out.push_back(std::move(name));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string ServedDeletionMessage(std::string_view mv_name,
                                  const std::vector<std::string>& services) {
  std::vector<std::string> sorted = services;
  std::sort(sorted.begin(), sorted.end());
  const bool one = sorted.size() == 1;
  return absl::StrCat("modelversion \"", std::string(mv_name), "\" is served by ",
                      one ? "inferenceservice " : "inferenceservices ", absl::StrJoin(sorted, ", "),
                      ": delete or repoint ", one ? "it" : "them", " first");
}

Json ModelVersionStatus(const Json& mv, const Json* checkpoint,
                        const std::vector<std::string>& served_by) {
  std::vector<std::string> served = served_by;
  std::sort(served.begin(), served.end());
  served.erase(std::unique(served.begin(), served.end()), served.end());
  Json st = {{"servedBy", served}};
  const std::string want = StrAt(mv, "spec", "checkpoint");
  std::string phase = "Ready", reason, message, cond_status = "True", cond_reason;
  if (want.empty()) {
    cond_reason = "NoCheckpoint";
    message = "no checkpoint named (spec.checkpoint)";
  } else if (checkpoint == nullptr || !checkpoint->is_object() ||
             StrAt(*checkpoint, "metadata", "name") != want) {
    phase = "Pending";
    reason = cond_reason = "CheckpointMissing";
    cond_status = "False";
    message = absl::StrCat("spec.checkpoint: checkpoint \"", want, "\" not found");
  } else {
    int64_t step = 0;
    if (auto s = checkpoint->find("spec"); s != checkpoint->end() && s->is_object()) {
      if (auto v = s->find("step"); v != s->end() && v->is_number_integer()) {
        step = v->get<int64_t>();
      }
    }
    Json lineage = {{"name", want},
                    {"jobName", StrAt(*checkpoint, "spec", "jobName")},
                    {"step", step},
                    {"path", StrAt(*checkpoint, "spec", "path")}};
    st["checkpoint"] = std::move(lineage);
    const std::string cp_phase = StrAt(*checkpoint, "status", "phase");
    if (cp_phase == "Ready") {
      cond_reason = "CheckpointReady";
      message = absl::StrCat("from checkpoint \"", want, "\" of trainingjob \"",
                             StrAt(*checkpoint, "spec", "jobName"), "\" at step ", step);
    } else {
      phase = "Pending";
      reason = cond_reason = "CheckpointNotReady";
      cond_status = "False";
      message = absl::StrCat("spec.checkpoint: checkpoint \"", want, "\" is ",
                             cp_phase.empty() ? "Pending" : cp_phase, ", not Ready");
    }
  }
  if (StrAt(mv, "status", "phase") == "Retired") phase = "Retired";
  st["phase"] = phase;
  st["reason"] = reason;
  st["message"] = message;
  st["conditions"] = Json::array({{{"type", "CheckpointResolved"},
                                   {"status", cond_status},
                                   {"reason", cond_reason},
                                   {"message", message}}});
  return st;
}

}  // namespace tessera::api
