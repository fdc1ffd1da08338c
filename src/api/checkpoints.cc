#include "api/checkpoints.h"

#include <algorithm>
#include <tuple>

#include "absl/time/time.h"
#include "api/store_layout.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;

std::string StrField(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

struct Entry {
  std::string name;
  int64_t step = 0;
  absl::Time created = absl::InfinitePast();
  std::string path;
  bool ready = false;

  // The order of the header: step, then creationTimestamp, then name.
  bool NewerThan(const Entry& o) const {
    return std::tie(step, created, name) > std::tie(o.step, o.created, o.name);
  }
};

// The job's Checkpoints, newest first.
std::vector<Entry> JobCheckpoints(std::string_view job_name,
                                  const std::vector<const Json*>& checkpoints) {
  std::vector<Entry> out;
  for (const Json* cp : checkpoints) {
    if (cp == nullptr || !cp->is_object()) continue;
    const Json& meta = cp->contains("metadata") ? (*cp)["metadata"] : Json();
    const Json& spec = cp->contains("spec") ? (*cp)["spec"] : Json();
    if (!spec.is_object() || StrField(spec, "jobName") != job_name) continue;
    if (meta.is_object() && meta.contains("deletionTimestamp") &&
        !meta["deletionTimestamp"].is_null()) {
      continue;
    }
    Entry e;
    e.name = StrField(meta, "name");
    if (e.name.empty()) continue;
    auto step = spec.find("step");
    if (step == spec.end() || !step->is_number_integer()) continue;
    e.step = step->get<int64_t>();
    e.path = StrField(spec, "path");
    absl::Time t;
    if (ParseTimestamp(StrField(meta, "creationTimestamp"), &t)) e.created = t;
    e.ready = StrField(cp->contains("status") ? (*cp)["status"] : Json(), "phase") == "Ready";
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.NewerThan(b); });
  return out;
}

}  // namespace

std::optional<CheckpointRef> NewestReadyCheckpoint(std::string_view job_name,
                                                   const std::vector<const Json*>& checkpoints) {
  for (const Entry& e : JobCheckpoints(job_name, checkpoints)) {
    if (e.ready) return CheckpointRef{e.name, e.step, e.path};
  }
  return std::nullopt;
}

Json ResumePointJson(const CheckpointRef& c) {
  return {{"checkpoint", c.name}, {"step", c.step}, {"path", c.path}};
}

std::vector<std::string> CheckpointsBeyondRetention(std::string_view job_name,
                                                    const std::vector<const Json*>& checkpoints,
                                                    int keep) {
  std::vector<std::string> out;
  if (keep <= 0) return out;
  int ready_seen = 0;
  std::string newest_ready;
  for (const Entry& e : JobCheckpoints(job_name, checkpoints)) {
    if (e.ready) {
      if (++ready_seen == 1) newest_ready = e.name;
      if (ready_seen > keep) out.push_back(e.name);
    } else if (ready_seen > 0) {
      out.push_back(e.name);  // older than the newest Ready one: abandoned or failed
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  // A name given twice (a malformed input) never takes the resume point with it.
  std::erase(out, newest_ready);
  return out;
}

int CheckpointKeep(const Json& job_spec) {
  if (!job_spec.is_object()) return 0;
  auto c = job_spec.find("checkpoint");
  if (c == job_spec.end() || !c->is_object()) return 0;
  auto k = c->find("keep");
  if (k == c->end() || !k->is_number_integer()) return 0;
  const int64_t v = k->get<int64_t>();
  return v <= 0 ? 0 : static_cast<int>(std::min<int64_t>(v, 1 << 30));
}

}  // namespace tessera::api
