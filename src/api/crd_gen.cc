#include "api/crd_gen.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/limits.h"

namespace tessera::api {
namespace {

using Json = nlohmann::json;

struct Column {
  std::string name;
  std::string type;  // string, integer, number, boolean, date
  std::string json_path;
  int priority = 0;  // 1: only with `kubectl get -o wide`
};

// A check of api/object_codec.cc (ValidateObject) or api/elastic_spec.cc (CheckElastic) that
// spans fields, in CEL, on the schema node at `at` (dotted, under spec; "" for spec itself).
struct CelRule {
  std::string at;
  std::string rule;
  std::string field_path;  // relative to `at`, as the standalone server names the field
  std::string message;     // the standalone server's message
};

// What the schema table does not say about a kind as a Kubernetes resource.
struct CrdKind {
  std::string kind;
  std::vector<std::string> short_names;
  std::string description;
  std::vector<Column> columns;  // before Age, which every kind ends with
  std::vector<CelRule> rules;
  std::vector<std::string> notes;  // what the CRD leaves to others, for the header
};

std::vector<CrdKind> BuildCrdKinds() {
  const std::string members = absl::StrCat(kMaxMembersPerJob);
  const Column phase{"Phase", "string", ".status.phase"};
  const Column reason{"Reason", "string", ".status.reason", 1};
  const std::string fleet =
      "A member asking more GPUs than the fleet's largest node has: the standalone server refuses "
      "it at create (it knows the fleet); here the scheduler holds its Pods and says why.";
  const std::string grace =
      "The annotation tessera.dev/grace-seconds (0 to 600): checked by the standalone server; a "
      "CEL rule cannot read annotations, so its reader clamps it (as the agent does).";
  return {
      {"TrainingJob",
       {"tj"},
       "A distributed training job: groups of members scheduled as one gang, restarted from its "
       "newest checkpoint up to spec.maxRestarts times.",
       {phase,
        {"Queue", "string", ".spec.queue"},
        {"Replicas", "integer", ".status.replicas"},
        {"Restarts", "integer", ".status.restarts"},
        reason},
       {
           {"groups", absl::StrCat("self.map(g, g.count).sum() <= ", members), "",
            absl::StrCat("the groups' counts add up to more than a job's ", members, " members")},
           {"",
            "!has(self.elastic) || self.elastic.maxReplicas == self.groups.map(g, g.count).sum()",
            ".elastic.maxReplicas",
            "must equal the job's replicas, the sum of spec.groups[].count: the groups' counts are "
            "the maximum"},
           {"elastic", "self.minReplicas <= self.maxReplicas", ".minReplicas",
            "must be <= spec.elastic.maxReplicas"},
           {"",
            "!has(self.elastic) || !has(self.gang) || !has(self.gang.minMember) || "
            "self.gang.minMember == 0 || self.gang.minMember == self.elastic.minReplicas",
            ".gang.minMember", "conflicts with spec.elastic.minReplicas; set one of them"},
       },
       {fleet, grace,
        "spec.queue and spec.priorityClassName naming objects that exist: neither schema checks "
        "it; what runs the job reports a missing one."}},
      {"InferenceService",
       // Not "isvc": KServe's InferenceService has it, and kubectl resolves a short name two
       // CRDs share to only one of them.
       {"tisvc"},
       "A model served by replicas, scaled between spec.replicas.min and max on their reported "
       "latency and throughput.",
       {phase,
        {"Model", "string", ".spec.modelVersion"},
        {"Replicas", "integer", ".status.replicas"},
        {"Desired", "integer", ".status.desiredReplicas"},
        {"GPUs", "integer", ".spec.gpusPerReplica"},
        {"Queue", "string", ".spec.queue", 1},
        reason},
       {{"replicas", "self.min <= self.max", ".min", "must be <= spec.replicas.max"}},
       {fleet, grace,
        "spec.modelVersion, spec.queue and spec.priorityClassName naming objects that exist: "
        "neither schema checks it; what runs the service reports a missing one."}},
      {"GPUPool",
       {"gpool"},
       "A logical group of GPUs: the nodes of one GPU type its selector picks, and the queues "
       "that may draw guaranteed quota from them.",
       {{"Type", "string", ".spec.gpuType"}, {"Capacity", "integer", ".spec.capacity"}, phase},
       {},
       {"spec.queues naming queues that exist: neither schema checks it."}},
      {"Checkpoint",
       {"ckpt"},
       "Training state a job wrote at a step; the job's newest Ready checkpoint is where it "
       "resumes.",
       {{"Job", "string", ".spec.jobName"},
        {"Step", "integer", ".spec.step"},
        phase,
        {"Path", "string", ".spec.path", 1}},
       {},
       {"spec.jobName naming a job that exists: neither schema checks it."}},
      {"ModelVersion",
       {"mv"},
       "One version of a model and its lineage: the checkpoint it was made from and where its "
       "artifacts are.",
       {{"Model", "string", ".spec.model"},
        {"Version", "string", ".spec.version"},
        phase,
        {"Checkpoint", "string", ".spec.checkpoint", 1}},
       {},
       {"spec.checkpoint naming a Checkpoint that exists: neither schema checks it."}},
      {"Queue",
       // Not "q": other schedulers' Queue kinds may be installed beside it.
       {"tq"},
       "A node of the fair-share queue tree that `tessera scheduler` reads: quotas, weight, "
       "borrowing, and the namespaces whose workloads it admits. Cluster-scoped: queues divide "
       "the whole cluster.",
       {{"Parent", "string", ".spec.parent"}, {"Weight", "number", ".spec.weight"}},
       {},
       {"The tree as a whole (a parent that exists, no cycles, children's guarantees within "
        "their parent's): the standalone server refuses a write that breaks it; a schema sees "
        "one object at a time, so here the scheduler keeps its previous tree and logs "
        "\"queues not changed\"."}},
  };
}

const std::vector<CrdKind>& CrdKindTable() {
  static const std::vector<CrdKind>* t = new std::vector<CrdKind>(BuildCrdKinds());
  return *t;
}

// A CEL string literal.
std::string CelString(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

void AddRule(Json& node, const std::string& rule, const std::string& message,
             const std::string& field_path = "") {
  Json r = {{"rule", rule}, {"message", message}};
  if (!field_path.empty()) r["fieldPath"] = field_path;
  node["x-kubernetes-validations"].push_back(std::move(r));
}

void AddBounds(const Schema& s, Json& out) {
  if (s.positive() && (!s.minimum() || *s.minimum() <= 0)) {
    out["minimum"] = 0;
    out["exclusiveMinimum"] = true;
  } else if (s.minimum()) {
    out["minimum"] = *s.minimum();
  }
  if (s.maximum()) out["maximum"] = *s.maximum();
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The schema node of the field at dotted `path` under `spec` ("" for spec itself). Rules sit on
// fields, never inside a map's or an array's element.
Json& NodeAt(Json& spec, const std::string& path) {
  Json* n = &spec;
  if (path.empty()) return *n;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    n = &(*n)["properties"][std::string(part)];
  }
  return *n;
}

Json Root(const KindInfo& info, const CrdKind& k) {
  Json spec = OpenApiSchema(*info.object_schema.FieldSchema("spec"));
  for (const CelRule& r : k.rules) AddRule(NodeAt(spec, r.at), r.rule, r.message, r.field_path);
  Json root = {
      {"type", "object"},
      {"description", k.description},
      {"required", {"spec"}},
      {"properties",
       {{"apiVersion", {{"type", "string"}}},
        {"kind", {{"type", "string"}}},
        // A CRD's schema may say nothing of metadata but name and generateName.
        {"metadata", {{"type", "object"}}},
        {"spec", std::move(spec)},
        // The controllers', written through the status subresource; its fields grow with them
        // without a new CRD version, so it is neither validated nor pruned.
        {"status", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}},
  };
  // metadata.name: the apiserver allows any DNS subdomain (dots included); the standalone
  // server a DNS label. Only a rule at the root may read it.
  const Schema* meta = info.object_schema.FieldSchema("metadata");
  const Schema* name = meta ? meta->FieldSchema("name") : nullptr;
  if (name != nullptr && name->dns_label()) {
    AddRule(root,
            absl::StrCat("size(self.metadata.name) <= 63 && self.metadata.name.matches(",
                         CelString(kDnsLabelPattern), ")"),
            "metadata.name: must be a lower-case DNS label (a-z, 0-9, '-', at most 63 "
            "characters)");
  }
  return root;
}

// Appends `text` wrapped at 96 columns: the first line after `first`, the others after `rest`.
void Wrap(std::vector<std::string>& out, const std::string& text, const std::string& first,
          const std::string& rest) {
  std::vector<absl::string_view> words;
  size_t width = first.size();
  bool first_line = true;
  for (absl::string_view word : absl::StrSplit(text, ' ')) {
    if (!words.empty() && width + 1 + word.size() > 96) {
      out.push_back(absl::StrCat(first_line ? first : rest, absl::StrJoin(words, " ")));
      words.clear();
      width = rest.size();
      first_line = false;
    }
    width += (words.empty() ? 0 : 1) + word.size();
    words.push_back(word);
  }
  out.push_back(absl::StrCat(first_line ? first : rest, absl::StrJoin(words, " ")));
}

std::vector<std::string> Header(const KindInfo& info, const CrdKind& k) {
  std::vector<std::string> h;
  Wrap(h,
       absl::StrCat(info.kind, " (", kCrdGroup, "/v1, ", info.namespaced ? "Namespaced" : "Cluster",
                    "): ", k.description),
       "", "");
  h.emplace_back();
  Wrap(h,
       "Generated by `tessera crds` from the schema table that validates the standalone server's "
       "API (src/api/kinds.cc; the generator is src/api/crd_gen.cc). Do not edit: change the "
       "table and run `tessera crds -o deploy/kubernetes/crds`.",
       "", "");
  h.emplace_back();
  Wrap(h,
       absl::StrCat("The spec schema has the standalone server's fields, types, required fields, "
                    "enums and limits; a DNS label is a pattern. CEL rules "
                    "(x-kubernetes-validations) check what OpenAPI cannot say: that metadata.name "
                    "is a DNS label (the apiserver itself allows dots)",
                    k.rules.empty() ? "."
                                    : ", and the cross-field checks of "
                                      "api/object_codec.cc and api/elastic_spec.cc:"),
       "", "");
  for (const CelRule& r : k.rules) {
    Wrap(h, absl::StrCat("spec", r.at.empty() ? "" : ".", r.at, r.field_path, ": ", r.message),
         "  ", "    ");
  }
  std::vector<std::string> notes = {
      "Unknown fields: the standalone server refuses them; a structural schema cannot, so the "
      "apiserver prunes them, or refuses them when the client asks for strict field validation "
      "(kubectl does by default).",
      "String lengths: the standalone server counts bytes, the apiserver characters, so a string "
      "of multi-byte characters may pass here and be refused there. A NUL character in a string: "
      "refused there, left here to whoever passes it on (the operator, the kubelet).",
      "metadata: here only the name is checked against the table; labels and annotations follow "
      "Kubernetes' own rules (label values stricter, an annotation may exceed the 4096 bytes the "
      "standalone server allows).",
      "The status: written by Tessera's controllers through the status subresource, it is neither "
      "validated nor pruned here (its fields may grow without a new CRD version); the standalone "
      "server validates it.",
  };
  if (!info.namespaced) {
    notes.push_back(
        "metadata.namespace on this cluster-scoped kind: the standalone server refuses it, the "
        "apiserver drops it.");
  }
  notes.insert(notes.end(), k.notes.begin(), k.notes.end());
  h.emplace_back();
  h.emplace_back("Not checked here, and by whom instead:");
  for (const std::string& n : notes) Wrap(h, n, "- ", "  ");
  return h;
}

}  // namespace

Json OpenApiSchema(const Schema& s) {
  Json out = Json::object();
  switch (s.type()) {
    case Schema::Type::kString:
      out["type"] = "string";
      if (s.dns_label()) {
        out["maxLength"] = s.max_length() > 0 ? std::min<size_t>(s.max_length(), 63) : 63;
        out["pattern"] = kDnsLabelPattern;
      } else if (s.max_length() > 0) {
        out["maxLength"] = s.max_length();
      }
      if (!s.one_of().empty()) out["enum"] = s.one_of();
      break;
    case Schema::Type::kInt:
      out["type"] = "integer";
      AddBounds(s, out);
      break;
    case Schema::Type::kNumber:
      out["type"] = "number";
      AddBounds(s, out);
      break;
    case Schema::Type::kBool:
      out["type"] = "boolean";
      break;
    case Schema::Type::kObject: {
      out["type"] = "object";
      out["properties"] = Json::object();
      Json required = Json::array();
      for (const Schema::Field& f : s.fields()) {
        out["properties"][f.name] = OpenApiSchema(f.schema);
        if (f.required) required.push_back(f.name);
      }
      if (!required.empty()) out["required"] = std::move(required);
      break;
    }
    case Schema::Type::kArray:
      out["type"] = "array";
      out["items"] = OpenApiSchema(*s.element());
      if (s.min_items() > 0) out["minItems"] = s.min_items();
      if (s.max_items() > 0) out["maxItems"] = s.max_items();
      break;
    case Schema::Type::kMap: {
      out["type"] = "object";
      out["additionalProperties"] = OpenApiSchema(*s.element());
      if (s.max_items() > 0) out["maxProperties"] = s.max_items();
      if (!s.keys().empty()) {
        std::vector<std::string> alternatives;
        for (const std::string& k : s.keys()) {
          alternatives.push_back(
              !k.empty() && k.back() == '*'
                  ? absl::StrCat("k.startsWith(", CelString(k.substr(0, k.size() - 1)), ")")
                  : absl::StrCat("k == ", CelString(k)));
        }
        AddRule(out, absl::StrCat("self.all(k, ", absl::StrJoin(alternatives, " || "), ")"),
                absl::StrCat("unknown key; expected one of: ", absl::StrJoin(s.keys(), ", ")));
      }
      break;
    }
    case Schema::Type::kAny:
      out["x-kubernetes-preserve-unknown-fields"] = true;
      break;
  }
  return out;
}

const std::vector<std::string>& CrdKinds() {
  static const std::vector<std::string>* kinds = [] {
    auto* v = new std::vector<std::string>();
    for (const CrdKind& k : CrdKindTable()) v->push_back(k.kind);
    return v;
  }();
  return *kinds;
}

std::vector<GeneratedCrd> GenerateCrds() {
  std::vector<GeneratedCrd> out;
  for (const CrdKind& k : CrdKindTable()) {
    const KindInfo* info = nullptr;
    for (const KindInfo& i : AllKinds()) {
      if (i.kind == k.kind) info = &i;
    }
    if (info == nullptr) continue;  // kinds.cc and this table disagree; crd_gen_test says so
    Json columns = Json::array();
    for (const Column& c : k.columns) {
      Json col = {{"name", c.name}, {"type", c.type}, {"jsonPath", c.json_path}};
      if (c.priority != 0) col["priority"] = c.priority;
      columns.push_back(std::move(col));
    }
    columns.push_back(
        {{"name", "Age"}, {"type", "date"}, {"jsonPath", ".metadata.creationTimestamp"}});
    Json names = {{"kind", info->kind},          {"listKind", info->kind + "List"},
                  {"plural", info->plural},      {"singular", Lower(info->kind)},
                  {"shortNames", k.short_names}, {"categories", {"tessera"}}};
    Json crd = {
        {"apiVersion", "apiextensions.k8s.io/v1"},
        {"kind", "CustomResourceDefinition"},
        {"metadata",
         {{"name", absl::StrCat(info->plural, ".", kCrdGroup)},
          {"labels", {{"app.kubernetes.io/part-of", "tessera"}}}}},
        {"spec",
         {{"group", kCrdGroup},
          {"scope", info->namespaced ? "Namespaced" : "Cluster"},
          {"names", std::move(names)},
          {"versions",
           {{{"name", "v1"},
             {"served", true},
             {"storage", true},
             {"subresources", {{"status", Json::object()}}},
             {"additionalPrinterColumns", std::move(columns)},
             {"schema", {{"openAPIV3Schema", Root(*info, k)}}}}}}}},
    };
    out.push_back({info->kind, absl::StrCat(kCrdGroup, "_", info->plural, ".yaml"),
                   Header(*info, k), std::move(crd)});
  }
  return out;
}

}  // namespace tessera::api
