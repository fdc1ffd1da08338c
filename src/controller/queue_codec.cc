#include "controller/queue_codec.h"

#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "controller/controller_internal.h"

namespace tessera::controller {
namespace {

using internal::Str;

absl::Status Bad(const std::string& field, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", msg));
}

// User unit -> the tree's unit (milli-GPU, milli-CPU, MiB).
int64_t Scale(const std::string& resource) { return resource == "memory" ? 1024 : 1000; }

absl::Status Amount(const Json& v, const std::string& field, const std::string& res, int64_t* out) {
  if (!v.is_number()) return Bad(field, "must be a number");
  double d = v.get<double>();
  if (!std::isfinite(d) || d < 0 || d > 1e12) return Bad(field, "must be a number >= 0");
  *out = static_cast<int64_t>(std::llround(d * static_cast<double>(Scale(res))));
  return absl::OkStatus();
}

// Replaces the tree validator's "queues[i]" by the object's own field path
// ("spec") when i is `self`, else by the queue's name.
std::string Rename(const std::string& msg, const std::vector<sched::QueueSpec>& queues, int self) {
  if (!absl::StartsWith(msg, "queues[")) return msg;
  size_t close = msg.find(']');
  int i = -1;
  if (close == std::string::npos || !absl::SimpleAtoi(msg.substr(7, close - 7), &i) || i < 0 ||
      i >= static_cast<int>(queues.size())) {
    return msg;
  }
  std::string rest = msg.substr(close + 1);
  if (i == self) {
    if (absl::StartsWith(rest, ".name")) return absl::StrCat("metadata.name", rest.substr(5));
    return absl::StrCat("spec", rest);
  }
  return absl::StrCat("queue \"", queues[i].name, "\"", rest);
}

}  // namespace

absl::StatusOr<sched::QueueSpec> QueueSpecFromObject(const Json& obj) {
  sched::QueueSpec q;
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) {
    return Bad("metadata", "is required");
  }
  q.name = Str(obj["metadata"], "name");
  if (q.name.empty()) return Bad("metadata.name", "is required");
  const Json spec = obj.contains("spec") && obj["spec"].is_object() ? obj["spec"] : Json::object();
  q.parent = Str(spec, "parent");
  if (spec.contains("weight")) {
    if (!spec["weight"].is_number() || !(spec["weight"].get<double>() > 0)) {
      return Bad("spec.weight", "must be a number > 0");
    }
    q.weight = spec["weight"].get<double>();
  }
  const bool borrowing = spec.value("borrowing", false);
  if (spec.contains("gpuQuota") && spec["gpuQuota"].is_object()) {
    for (const auto& [model, v] : spec["gpuQuota"].items()) {
      const std::string res = absl::StrCat("gpu/", model);
      sched::QuotaSpec qs;
      RETURN_IF_ERROR(Amount(v, absl::StrCat("spec.gpuQuota.", model), res, &qs.guaranteed));
      qs.borrowing_limit = borrowing ? -1 : 0;
      q.quotas[res] = qs;
    }
  }
  if (spec.contains("quotas")) {
    if (!spec["quotas"].is_object()) return Bad("spec.quotas", "must be a mapping");
    for (const auto& [res, v] : spec["quotas"].items()) {
      const std::string f = absl::StrCat("spec.quotas.", res);
      if (res != "cpu" && res != "memory" && !absl::StartsWith(res, "gpu/")) {
        return Bad(f, "unknown resource; use \"cpu\", \"memory\" or \"gpu/<model>\"");
      }
      if (!v.is_object()) return Bad(f, "must be a mapping");
      sched::QuotaSpec qs;
      for (const auto& [k, a] : v.items()) {
        int64_t* out = k == "guaranteed"       ? &qs.guaranteed
                       : k == "borrowingLimit" ? &qs.borrowing_limit
                       : k == "lendingLimit"   ? &qs.lending_limit
                                               : nullptr;
        if (out == nullptr) {
          return Bad(absl::StrCat(f, ".", k),
                     "unknown field; expected one of: borrowingLimit, guaranteed, lendingLimit");
        }
        RETURN_IF_ERROR(Amount(a, absl::StrCat(f, ".", k), res, out));
      }
      q.quotas[res] = qs;
    }
  }
  return q;
}

sched::QueueManagerConfig BuildQueueConfig(const sched::QueueManagerConfig& base,
                                           const std::vector<Json>& queue_objects,
                                           const std::set<std::string>& job_queues,
                                           std::vector<std::string>* problems) {
  sched::QueueManagerConfig c = base;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < c.tree.queues.size(); ++i) index[c.tree.queues[i].name] = i;
  for (const Json& obj : queue_objects) {
    absl::StatusOr<sched::QueueSpec> q = QueueSpecFromObject(obj);
    if (!q.ok()) {
      if (problems) {
        problems->push_back(
            absl::StrCat("queue ", Str(obj["metadata"], "name"), ": ", q.status().message()));
      }
      continue;
    }
    if (auto it = index.find(q->name); it != index.end()) {
      c.tree.queues[it->second] = *std::move(q);
    } else {
      index[q->name] = c.tree.queues.size();
      c.tree.queues.push_back(*std::move(q));
    }
  }
  // Without any queue configured, every name a job uses is a queue without quota (a cluster
  // that does not share by queues). With queues configured, only `default` (where a job naming
  // none goes) is implicit: another unknown name is most likely a typo, and a job naming it waits
  // (QueueManager::Submit says which queue it may have meant) rather than run outside quota.
  const bool configured = !c.tree.queues.empty();
  for (const std::string& name : job_queues) {
    if (index.contains(name) || (configured && name != kDefaultQueue)) continue;
    index[name] = c.tree.queues.size();
    c.tree.queues.push_back(sched::QueueSpec{.name = name});
  }
  return c;
}

absl::Status ValidateQueueChange(const sched::QueueManagerConfig& base,
                                 const std::vector<Json>& stored, const std::string& name,
                                 const Json* obj) {
  std::vector<Json> objs;
  for (const Json& o : stored) {
    if (Str(o["metadata"], "name") != name) objs.push_back(o);
  }
  if (obj != nullptr) {
    RETURN_IF_ERROR(QueueSpecFromObject(*obj).status());
    objs.push_back(*obj);
  }
  std::vector<std::string> problems;
  sched::QueueManagerConfig c = BuildQueueConfig(base, objs, {}, &problems);
  int self = -1;
  for (size_t i = 0; i < c.tree.queues.size(); ++i) {
    if (c.tree.queues[i].name == name) self = static_cast<int>(i);
  }
  absl::Status s = sched::ValidateQueueTree(c.tree);
  if (s.ok()) return absl::OkStatus();
  std::string msg = Rename(std::string(s.message()), c.tree.queues, obj != nullptr ? self : -1);
  if (obj == nullptr)
    msg = absl::StrCat("deleting queue \"", name, "\" would break the tree: ", msg);
  return absl::InvalidArgumentError(msg);
}

}  // namespace tessera::controller
