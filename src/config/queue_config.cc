#include "config/queue_config.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/yaml.h"

namespace tessera::config {
namespace {

using sched::QueueManagerConfig;

absl::Status Bad(const std::string& field, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", msg));
}

absl::Status OnlyKeys(const YAML::Node& n, const std::string& field,
                      const std::set<std::string>& allowed) {
  if (!n.IsMap()) return Bad(field.empty() ? "(document)" : field, "must be a mapping");
  for (const auto& kv : n) {
    std::string k = kv.first.as<std::string>();
    if (!allowed.contains(k)) {
      return Bad(field.empty() ? k : absl::StrCat(field, ".", k),
                 absl::StrCat("unknown field; expected one of: ", absl::StrJoin(allowed, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::Status GetDouble(const YAML::Node& n, const std::string& field, double* out) {
  try {
    *out = n.as<double>();
  } catch (const YAML::Exception&) {
    return Bad(field, absl::StrCat("must be a number, got \"", n.Scalar(), "\""));
  }
  if (!std::isfinite(*out)) return Bad(field, "must be a finite number");
  return absl::OkStatus();
}

absl::Status GetBool(const YAML::Node& n, const std::string& field, bool* out) {
  try {
    *out = n.as<bool>();
  } catch (const YAML::Exception&) {
    return Bad(field, absl::StrCat("must be true or false, got \"", n.Scalar(), "\""));
  }
  return absl::OkStatus();
}

absl::Status GetString(const YAML::Node& n, const std::string& field, std::string* out) {
  if (!n.IsScalar()) return Bad(field, "must be a string");
  *out = n.Scalar();
  return absl::OkStatus();
}

absl::Status GetDuration(const YAML::Node& n, const std::string& field, absl::Duration* out) {
  if (!n.IsScalar() || !absl::ParseDuration(n.Scalar(), out)) {
    return Bad(field, absl::StrCat("must be a duration such as \"30s\" or \"1h\", got \"",
                                   n.IsScalar() ? n.Scalar() : "(not a scalar)", "\""));
  }
  return absl::OkStatus();
}

// Amount in the config's unit -> the scheduler's (milli-GPU, milli-CPU, MiB).
int64_t Scale(const std::string& resource) {
  if (resource == "memory") return 1024;
  return 1000;
}

absl::Status ParseQuota(const YAML::Node& n, const std::string& field, const std::string& res,
                        sched::QuotaSpec* q) {
  absl::Status s = OnlyKeys(n, field, {"guaranteed", "borrowingLimit", "lendingLimit"});
  if (!s.ok()) return s;
  auto amount = [&](const char* key, int64_t* out) -> absl::Status {
    if (!n[key]) return absl::OkStatus();
    double v;
    std::string f = absl::StrCat(field, ".", key);
    absl::Status st = GetDouble(n[key], f, &v);
    if (!st.ok()) return st;
    if (v < 0) return Bad(f, "must be >= 0");
    *out = static_cast<int64_t>(std::llround(v * Scale(res)));
    return absl::OkStatus();
  };
  if (s = amount("guaranteed", &q->guaranteed); !s.ok()) return s;
  if (s = amount("borrowingLimit", &q->borrowing_limit); !s.ok()) return s;
  return amount("lendingLimit", &q->lending_limit);
}

absl::Status ParseQueues(const YAML::Node& n, QueueManagerConfig* c) {
  if (!n.IsSequence()) return Bad("queues", "must be a list of queues");
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node& qn = n[i];
    std::string f = absl::StrCat("queues[", i, "]");
    absl::Status s = OnlyKeys(qn, f, {"name", "parent", "weight", "quotas"});
    if (!s.ok()) return s;
    sched::QueueSpec q;
    if (!qn["name"]) return Bad(absl::StrCat(f, ".name"), "required");
    if (s = GetString(qn["name"], f + ".name", &q.name); !s.ok()) return s;
    if (qn["parent"] && !(s = GetString(qn["parent"], f + ".parent", &q.parent)).ok()) return s;
    if (qn["weight"] && !(s = GetDouble(qn["weight"], f + ".weight", &q.weight)).ok()) return s;
    if (qn["quotas"]) {
      const YAML::Node& qs = qn["quotas"];
      if (!qs.IsMap()) return Bad(f + ".quotas", "must be a mapping of resource -> quota");
      for (const auto& kv : qs) {
        std::string res = kv.first.as<std::string>();
        sched::QuotaSpec quota;
        s = ParseQuota(kv.second, absl::StrCat(f, ".quotas.", res), res, &quota);
        if (!s.ok()) return s;
        q.quotas[res] = quota;
      }
    }
    c->tree.queues.push_back(std::move(q));
  }
  return absl::OkStatus();
}

// sched's validator names fields as queues[i].quotas["r"]; the YAML path is
// queues[i].quotas.r. Rewrite so the message names the field as written.
std::string YamlPath(std::string msg) {
  for (size_t p = msg.find("[\""); p != std::string::npos; p = msg.find("[\"")) {
    size_t e = msg.find("\"]", p);
    if (e == std::string::npos) break;
    msg = absl::StrCat(msg.substr(0, p), ".", msg.substr(p + 2, e - p - 2), msg.substr(e + 2));
  }
  return msg;
}

}  // namespace

absl::StatusOr<QueueManagerConfig> ParseQueueConfig(absl::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("yaml: ", e.what()));
  }
  QueueManagerConfig c;
  absl::Status s = OnlyKeys(
      root, "",
      {"fairShare", "priorityClasses", "defaultPriorityClass", "preemption", "backfill", "queues"});
  if (!s.ok()) return s;
  if (const YAML::Node fs = root["fairShare"]) {
    if (s = OnlyKeys(fs, "fairShare", {"halfLife"}); !s.ok()) return s;
    if (fs["halfLife"] &&
        !(s = GetDuration(fs["halfLife"], "fairShare.halfLife", &c.tree.half_life)).ok()) {
      return s;
    }
  }
  if (const YAML::Node pc = root["priorityClasses"]) {
    if (!pc.IsMap()) return Bad("priorityClasses", "must be a mapping of name -> value");
    for (const auto& kv : pc) {
      std::string name = kv.first.as<std::string>();
      double v;
      if (s = GetDouble(kv.second, "priorityClasses." + name, &v); !s.ok()) return s;
      if (v != std::floor(v)) return Bad("priorityClasses." + name, "must be an integer");
      c.priority_classes[name] = static_cast<int32_t>(std::max(-1.0, std::min(v, 2e9)));
    }
  }
  if (root["defaultPriorityClass"] &&
      !(s = GetString(root["defaultPriorityClass"], "defaultPriorityClass",
                      &c.default_priority_class))
           .ok()) {
    return s;
  }
  if (const YAML::Node p = root["preemption"]) {
    s = OnlyKeys(p, "preemption",
                 {"withinQueue", "reclaim", "crossQueueLowerPriority", "maxEvictedGpus",
                  "maxEvictedRatio", "gracePeriod", "minRuntime", "order"});
    if (!s.ok()) return s;
    auto& pp = c.preemption;
    if (p["withinQueue"] &&
        !(s = GetBool(p["withinQueue"], "preemption.withinQueue", &pp.within_queue)).ok())
      return s;
    if (p["reclaim"] && !(s = GetBool(p["reclaim"], "preemption.reclaim", &pp.reclaim)).ok())
      return s;
    if (p["crossQueueLowerPriority"] &&
        !(s = GetBool(p["crossQueueLowerPriority"], "preemption.crossQueueLowerPriority",
                      &pp.cross_queue_lower_priority))
             .ok())
      return s;
    if (p["maxEvictedGpus"]) {
      double v;
      if (s = GetDouble(p["maxEvictedGpus"], "preemption.maxEvictedGpus", &v); !s.ok()) return s;
      pp.max_evicted_gpus = static_cast<int64_t>(v);
      if (v != std::floor(v)) return Bad("preemption.maxEvictedGpus", "must be an integer");
    }
    if (p["maxEvictedRatio"] &&
        !(s = GetDouble(p["maxEvictedRatio"], "preemption.maxEvictedRatio", &pp.max_evicted_ratio))
             .ok())
      return s;
    if (p["order"]) {
      std::string order;
      if (s = GetString(p["order"], "preemption.order", &order); !s.ok()) return s;
      if (order != "priorityFirst" && order != "gangsFirst") {
        return Bad("preemption.order",
                   absl::StrCat("must be priorityFirst or gangsFirst, got \"", order, "\""));
      }
      pp.gangs_first = order == "gangsFirst";
    }
    if (p["minRuntime"] &&
        !(s = GetDuration(p["minRuntime"], "preemption.minRuntime", &pp.min_runtime)).ok())
      return s;
    if (p["gracePeriod"] &&
        !(s = GetDuration(p["gracePeriod"], "preemption.gracePeriod", &pp.grace_period)).ok())
      return s;
  }
  if (const YAML::Node b = root["backfill"]) {
    if (s = OnlyKeys(b, "backfill",
                     {"enabled", "defaultRuntime", "reservations", "learnRuntimes", "lendReserved",
                      "minLoan"});
        !s.ok()) {
      return s;
    }
    if (b["enabled"] && !(s = GetBool(b["enabled"], "backfill.enabled", &c.backfill)).ok())
      return s;
    if (b["defaultRuntime"] &&
        !(s = GetDuration(b["defaultRuntime"], "backfill.defaultRuntime", &c.default_runtime)).ok())
      return s;
    if (b["lendReserved"] &&
        !(s = GetBool(b["lendReserved"], "backfill.lendReserved", &c.lend_reserved)).ok())
      return s;
    if (b["minLoan"] && !(s = GetDuration(b["minLoan"], "backfill.minLoan", &c.min_loan)).ok())
      return s;
    if (b["learnRuntimes"] &&
        !(s = GetBool(b["learnRuntimes"], "backfill.learnRuntimes", &c.learn_runtimes)).ok())
      return s;
    if (b["reservations"]) {
      double v = 0;
      if (s = GetDouble(b["reservations"], "backfill.reservations", &v); !s.ok()) return s;
      if (v != std::floor(v) || v < 1 || v > 64) {
        return Bad("backfill.reservations", "must be an integer in 1..64");
      }
      c.reservations = static_cast<int32_t>(v);
    }
  }
  if (!root["queues"]) return Bad("queues", "required: at least one queue");
  if (s = ParseQueues(root["queues"], &c); !s.ok()) return s;
  s = sched::ValidateQueueManagerConfig(c);
  if (!s.ok()) return absl::InvalidArgumentError(YamlPath(std::string(s.message())));
  return c;
}

absl::StatusOr<QueueManagerConfig> LoadQueueConfigFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  auto c = ParseQueueConfig(text.str());
  if (!c.ok())
    return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  return c;
}

absl::Status QueueConfigStore::Load(absl::string_view yaml, sched::QueueManager* manager) {
  auto c = ParseQueueConfig(yaml);
  if (!c.ok()) return c.status();
  if (manager != nullptr) {
    absl::Status s = manager->Reconfigure(*c);
    if (!s.ok()) return s;
  }
  current_ = std::move(*c);
  ++generation_;
  return absl::OkStatus();
}

}  // namespace tessera::config
