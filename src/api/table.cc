#include "api/table.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/json_fields.h"
#include "api/kinds.h"
#include "api/store_layout.h"

namespace tessera::api {

using Json = nlohmann::json;

namespace {

std::string Meta(const Json& obj, const char* key) { return StrOr(Sub(obj, "metadata"), key); }

std::string JoinNodes(const Json& st) {
  std::vector<std::string> nodes;
  for (const Json& m : Items(st, "placement")) {
    std::string n = StrOr(m, "node");
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  return nodes.empty() ? "<none>" : absl::StrJoin(nodes, ",");
}

// squeue's START: when the job first started, or "~" and the backfill reservation's start
// while one holds room for it, else "-".
std::string StartColumn(const Json& st) {
  if (st.contains("startTime") && st["startTime"].is_string()) return st["startTime"];
  if (st.contains("estimatedStartTime") && st["estimatedStartTime"].is_string()) {
    return "~" + st["estimatedStartTime"].get<std::string>();
  }
  return "-";
}

bool IsJobKind(absl::string_view kind) {
  return kind == "TrainingJob" || kind == "InferenceService";
}

std::vector<std::string> JobCells(absl::string_view kind, const Json& o, const Json& st,
                                  const Json& spec, const std::string& age) {
  size_t placed = st.contains("placement") ? st["placement"].size() : 0;
  std::string members = std::to_string(placed);
  std::string gpus = std::to_string(RequestedGpus(o));
  if (spec.contains("elastic") && spec["elastic"].is_object()) {
    // An elastic job: current of maximum replicas ("2/4"), and while it is placed the GPUs it
    // holds of those it asks for ("6/12"): a shrunken job holds fewer than it requested.
    members = absl::StrCat(IntOr(st, "replicas", static_cast<int64_t>(placed)), "/",
                           IntOr(spec["elastic"], "maxReplicas", 0));
    if (placed > 0) gpus = absl::StrCat(HeldGpus(o), "/", gpus);
  } else if (kind == "InferenceService" && spec.contains("slo") && spec["slo"].is_object()) {
    // An autoscaled service: replicas bound of those its autoscaler wants ("2/4", as kubectl
    // shows a Deployment's ready/desired), and the GPUs held of those its replicas.max could take.
    members = absl::StrCat(placed, "/",
                           st.contains("desiredReplicas")
                               ? std::to_string(IntOr(st, "desiredReplicas", int64_t{0}))
                               : std::string("-"));
    if (placed > 0) gpus = absl::StrCat(HeldGpus(o), "/", gpus);
  }
  // status.reason is a bounded word (a waiting job's OverQuota, NoRoom...; a failed one's Error
  // or Killed); one that only repeats the phase says nothing.
  std::string reason = StrOr(st, "reason", "");
  if (reason.empty() || reason == Phase(o)) reason = "-";
  std::string prio = st.contains("priority") && st["priority"].is_number_integer()
                         ? std::to_string(st["priority"].get<int64_t>())
                         : StrOr(spec, "priorityClassName", "-");
  return {Meta(o, "name"),
          Phase(o),
          reason,
          gpus,
          members,
          std::to_string(IntOr(st, "generation", 0)),
          std::to_string(IntOr(st, "restarts", 0)),
          age,
          StrOr(spec, "queue", "default"),
          SubmittedBy(o),
          prio,
          StartColumn(st),
          JoinNodes(st),
          StrOr(st, "message", "")};
}

std::vector<std::string> NodeCells(const Json& o, const Json& st, const Json& spec,
                                   const std::string& age) {
  std::string status = Phase(o);
  if (BoolOr(spec, "unschedulable", false)) status += ",SchedulingDisabled";
  std::string model = StrOr(spec, "gpuType", "");
  if (model.empty() && spec.contains("gpus") && spec["gpus"].is_array() && !spec["gpus"].empty()) {
    model = StrOr(spec["gpus"][0], "model", "");
  }
  std::vector<std::string> bad, taints;
  if (st.contains("gpus") && st["gpus"].is_array()) {
    for (const Json& g : st["gpus"]) {
      if (StrOr(g, "health", "") == "Unhealthy")
        bad.push_back(std::to_string(IntOr(g, "index", 0)));
    }
  }
  if (spec.contains("taints") && spec["taints"].is_array()) {
    for (const Json& t : spec["taints"]) {
      taints.push_back(absl::StrCat(StrOr(t, "key", ""), ":", StrOr(t, "effect", "")));
    }
  }
  return {Meta(o, "name"),
          status,
          std::to_string(NodeGpuCount(spec)),
          model,
          StrOr(spec, "rack", "default"),
          age,
          StrOr(spec, "block", "default"),
          bad.empty() ? "<none>" : absl::StrJoin(bad, ","),
          StrOr(st, "lastHeartbeatTime", "<none>"),
          taints.empty() ? "<none>" : absl::StrJoin(taints, ",")};
}

std::vector<TableColumn> ColumnsOf(absl::string_view kind) {
  if (IsJobKind(kind)) {
    return {{"NAME", "metadata.name", 0},
            {"PHASE", "status.phase", 0},
            {"REASON", "status.reason, when it says more than the phase", 0},
            {"GPUS", "GPUs requested (held/requested for elastic and autoscaled jobs)", 0},
            {"MEMBERS", "members placed (replicas/maximum for elastic jobs)", 0},
            {"GENERATION", "status.generation: bumped by each restart or resize", 0},
            {"RESTARTS", "status.restarts", 0},
            {"AGE", "since metadata.creationTimestamp", 0},
            {"QUEUE", "spec.queue", 1},
            {"USER", "who submitted it", 1},
            {"PRIORITY", "status.priority, else spec.priorityClassName", 1},
            {"START", "status.startTime, or ~ the backfill reservation's start", 1},
            {"NODES", "the nodes of status.placement", 1},
            {"MESSAGE", "status.message", 1}};
  }
  if (kind == "Node") {
    return {{"NAME", "metadata.name", 0},
            {"STATUS", "status.phase, and SchedulingDisabled when cordoned", 0},
            {"GPUS", "GPUs the node declares", 0},
            {"MODEL", "GPU model", 0},
            {"RACK", "spec.rack", 0},
            {"AGE", "since metadata.creationTimestamp", 0},
            {"BLOCK", "spec.block", 1},
            {"UNHEALTHY", "indices of unhealthy GPUs", 1},
            {"HEARTBEAT", "status.lastHeartbeatTime", 1},
            {"TAINTS", "spec.taints as key:effect", 1}};
  }
  if (kind == "Event") {
    return {{"AGE", "since spec.eventTime", 0},
            {"TYPE", "Normal or Warning", 0},
            {"REASON", "spec.reason", 0},
            {"OBJECT", "the object it is about", 0},
            {"MESSAGE", "spec.message", 0}};
  }
  if (kind == "Cluster") {
    return {{"NAME", "metadata.name", 0},    {"STATUS", "as the hub last probed it", 0},
            {"GPUS", "status.gpus", 0},      {"FREE", "status.freeGpus", 0},
            {"SERVER", "spec.server", 0},    {"AGE", "since metadata.creationTimestamp", 0},
            {"MESSAGE", "status.message", 1}};
  }
  return {{"NAME", "metadata.name", 0},
          {"PHASE", "status.phase", 0},
          {"AGE", "since metadata.creationTimestamp", 0}};
}

}  // namespace

const std::vector<TableColumn>& TableColumns(absl::string_view kind) {
  // Built once per kind: every row asks for its kind's columns (the AGE cell's place).
  static const auto* const kJobs = new std::vector<TableColumn>(ColumnsOf("TrainingJob"));
  static const auto* const kNodes = new std::vector<TableColumn>(ColumnsOf("Node"));
  static const auto* const kEvents = new std::vector<TableColumn>(ColumnsOf("Event"));
  static const auto* const kClusters = new std::vector<TableColumn>(ColumnsOf("Cluster"));
  static const auto* const kOthers = new std::vector<TableColumn>(ColumnsOf(""));
  if (IsJobKind(kind)) return *kJobs;
  if (kind == "Node") return *kNodes;
  if (kind == "Event") return *kEvents;
  if (kind == "Cluster") return *kClusters;
  return *kOthers;
}

namespace {

// The cells of `o` with AGE left empty, and the time it counts from (nullopt: unknown).
std::vector<std::string> CellsWithoutAge(absl::string_view kind, const Json& o,
                                         std::optional<absl::Time>* since) {
  const Json& st = Sub(o, "status");
  const Json& spec = Sub(o, "spec");
  absl::Time t;
  const std::string from =
      kind == "Event" ? StrOr(spec, "eventTime", "") : Meta(o, "creationTimestamp");
  *since = ParseTimestamp(from, &t) ? std::optional<absl::Time>(t) : std::nullopt;
  const std::string age;
  if (IsJobKind(kind)) return JobCells(kind, o, st, spec, age);
  if (kind == "Node") return NodeCells(o, st, spec, age);
  if (kind == "Cluster") {
    // A federation member, as the hub last probed it (docs/federation.md).
    return {Meta(o, "name"),
            Phase(o).empty() ? "Unknown" : Phase(o),
            std::to_string(IntOr(st, "gpus", int64_t{0})),
            std::to_string(IntOr(st, "freeGpus", int64_t{0})),
            StrOr(spec, "server", ""),
            age,
            StrOr(st, "message", "")};
  }
  if (kind == "Event") {
    const Json& inv = Sub(spec, "involvedObject");
    return {
        age, StrOr(spec, "type", ""), StrOr(spec, "reason", ""),
        absl::StrCat(absl::AsciiStrToLower(StrOr(inv, "kind", "")), "/", StrOr(inv, "name", "")),
        StrOr(spec, "message", "")};
  }
  return {Meta(o, "name"), Phase(o), age};
}

// The index of the AGE column of `kind`, or -1.
int AgeColumn(absl::string_view kind) {
  const std::vector<TableColumn>& columns = TableColumns(kind);
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].name == "AGE") return static_cast<int>(i);
  }
  return -1;
}

std::string AgeSince(const std::optional<absl::Time>& since, absl::Time now) {
  if (!since) return "<unknown>";
  int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(now - *since));
  if (s < 120) return absl::StrCat(s, "s");
  if (s < 7200) return absl::StrCat(s / 60, "m");
  if (s < 172800) return absl::StrCat(s / 3600, "h");
  return absl::StrCat(s / 86400, "d");
}

}  // namespace

std::vector<std::string> TableCells(absl::string_view kind, const Json& o, absl::Time now) {
  std::optional<absl::Time> since;
  std::vector<std::string> cells = CellsWithoutAge(kind, o, &since);
  if (const int age = AgeColumn(kind); age >= 0 && age < static_cast<int>(cells.size())) {
    cells[age] = AgeSince(since, now);
  }
  return cells;
}

PreparedRow PrepareRow(absl::string_view kind, const Json& obj) {
  PreparedRow row;
  const std::vector<std::string> cells = CellsWithoutAge(kind, obj, &row.since);
  const int age = AgeColumn(kind);
  row.has_age = age >= 0 && age < static_cast<int>(cells.size());
  // Cells as JSON strings; "before" ends with the comma that precedes AGE.
  std::vector<std::string> before;
  for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
    const std::string text = Json(cells[i]).dump();
    if (row.has_age && i > age) {
      absl::StrAppend(&row.cells_after_age, ",", text);
    } else if (i != age || !row.has_age) {
      before.push_back(text);
    }
  }
  row.cells_before_age = absl::StrJoin(before, ",");
  if (row.has_age && !before.empty()) row.cells_before_age.push_back(',');
  Json meta = Json::object();
  for (const char* k : {"name", "namespace", "resourceVersion"}) {
    if (std::string v = Meta(obj, k); !v.empty()) meta[k] = v;
  }
  row.object = Json{{"apiVersion", "meta.k8s.io/v1"},
                    {"kind", "PartialObjectMetadata"},
                    {"metadata", std::move(meta)}}
                   .dump();
  return row;
}

std::string RowText(const PreparedRow& row, absl::Time now, bool with_metadata) {
  // The age is digits and a unit, or "<unknown>": nothing in it needs escaping.
  return absl::StrCat(R"({"cells":[)", row.cells_before_age,
                      row.has_age ? absl::StrCat("\"", AgeSince(row.since, now), "\"") : "",
                      row.cells_after_age, "]", with_metadata ? R"(,"object":)" : "",
                      with_metadata ? row.object : "", "}");
}

std::string TableText(absl::string_view kind, const std::string& rows, const Json& list_metadata) {
  Json columns = Json::array();
  for (const TableColumn& c : TableColumns(kind)) {
    columns.push_back({{"name", c.name},
                       {"type", "string"},
                       {"format", ""},
                       {"description", c.description},
                       {"priority", c.priority}});
  }
  return absl::StrCat(R"({"apiVersion":"meta.k8s.io/v1","columnDefinitions":)", columns.dump(),
                      R"(,"kind":"Table","metadata":)", list_metadata.dump(), R"(,"rows":[)", rows,
                      "]}\n");
}

bool AcceptsTable(absl::string_view accept) {
  for (absl::string_view type : absl::StrSplit(accept, ',')) {
    // "application/json;as=Table;v=v1;g=meta.k8s.io": the first type offered that the server
    // serves decides, as in kube-apiserver (a plain JSON first means objects).
    type = absl::StripAsciiWhitespace(type);
    if (absl::StrContains(type, "as=Table")) {
      return absl::StrContains(type, "g=meta.k8s.io") && !absl::StrContains(type, "v=v1beta1");
    }
    if (absl::StartsWith(type, "application/json") || type == "*/*") return false;
  }
  return false;
}

std::string Age(const std::string& ts, absl::Time now) {
  absl::Time t;
  return AgeSince(ParseTimestamp(ts, &t) ? std::optional<absl::Time>(t) : std::nullopt, now);
}

std::string Phase(const Json& obj) { return StrOr(Sub(obj, "status"), "phase"); }

std::string SubmittedBy(const Json& obj) {
  return StrOr(Sub(Sub(obj, "metadata"), "annotations"), kSubmittedByAnnotation, "-");
}

int64_t RequestedGpus(const Json& job) {
  if (!job.contains("spec") || !job["spec"].is_object()) return 0;
  const Json& spec = job["spec"];
  if (StrOr(job, "kind", "") == "InferenceService") {
    if (!spec.contains("replicas") || !spec["replicas"].is_object()) return 0;
    return IntOr(spec["replicas"], "max", int64_t{0}) * IntOr(spec, "gpusPerReplica", int64_t{0});
  }
  int64_t n = 0;
  if (spec.contains("groups") && spec["groups"].is_array()) {
    for (const Json& g : spec["groups"]) {
      n += IntOr(g, "count", 1) * IntOr(g, "gpusPerReplica", 0);
    }
  }
  return n;
}

int64_t HeldGpus(const Json& job) {
  int64_t n = 0;
  if (!job.contains("status") || !job["status"].contains("placement")) return n;
  for (const Json& m : job["status"]["placement"]) {
    if (m.contains("gpus")) n += static_cast<int64_t>(m["gpus"].size());
  }
  return n;
}

}  // namespace tessera::api
