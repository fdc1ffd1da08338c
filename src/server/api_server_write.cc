// The ApiServer's write verbs: create, update, the status subresource, delete and batch create.
// Status is the control plane's (docs/api.md, "Status"): a create stores the kind's first phase
// whatever status it carries, an update keeps the stored status, and only PUT .../status changes
// it, within what server/status_write.h allows the writer.
#include <httplib.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/kinds.h"
#include "api/model_lineage.h"
#include "api/object_codec.h"
#include "server/api_server.h"
#include "server/api_server_internal.h"
#include "server/status_write.h"

namespace tessera::server {

using api::Json;
using api::KindInfo;
using namespace internal;  // NOLINT: this module's reply helpers

namespace {

// The status a create stores: the kind's first phase, nothing a client sent.
Json InitialStatus(const KindInfo& kind) { return Json{{"phase", kind.phases.front()}}; }

// metadata.resourceVersion as a CAS precondition: 0 when absent or empty; -1 when malformed.
int64_t ExpectedRevision(const Json& body) {
  auto meta = body.find("metadata");
  if (meta == body.end() || !meta->is_object()) return 0;
  auto rv = meta->find("resourceVersion");
  if (rv == meta->end() || rv->is_null()) return 0;
  if (!rv->is_string()) return -1;
  const std::string& text = rv->get_ref<const std::string&>();
  if (text.empty()) return 0;
  int64_t n = 0;
  if (!absl::SimpleAtoi(text, &n) || n <= 0) return -1;
  return n;
}

// A node agent re-registering its own Node: what an admin decides (taints, cordon, pool) stays
// as stored, and its capacity may not grow beyond what is registered -- a node that could
// declare more GPUs, CPU or memory than it has would attract work it cannot run. Errors name
// the field.
std::vector<api::FieldError> RestrictNodeSelfUpdate(const Json& old_spec, Json& spec) {
  std::vector<api::FieldError> errors;
  for (const char* owned : {"taints", "unschedulable", "pool", "maxMembers"}) {
    if (old_spec.contains(owned)) {
      spec[owned] = old_spec[owned];
    } else {
      spec.erase(owned);
    }
  }
  if (api::NodeGpuCount(spec) > api::NodeGpuCount(old_spec)) {
    errors.push_back(
        {"spec.gpus", absl::StrCat("a node may not register more GPUs (", api::NodeGpuCount(spec),
                                   ") than it has (", api::NodeGpuCount(old_spec),
                                   "); an admin changes a node's capacity")});
  }
  for (const char* cap : {"cpuMilli", "memoryMiB", "gpuMemoryMiB"}) {
    if (!spec.contains(cap) || !old_spec.contains(cap)) continue;
    if (spec[cap].get<int64_t>() > old_spec[cap].get<int64_t>()) {
      errors.push_back(
          {absl::StrCat("spec.", cap), absl::StrCat("a node may not raise its registered ", cap,
                                                    " (", old_spec[cap].get<int64_t>(), ")")});
    }
  }
  return errors;
}

// Sets (or, for `user` null, removes) a job's submitted-by annotation: the server's record of who
// created it, never a client's.
void SetSubmittedBy(Json& obj, const std::string* user) {
  Json& meta = obj["metadata"];
  if (user != nullptr) {
    meta["annotations"][api::kSubmittedByAnnotation] = *user;
    return;
  }
  if (meta.contains("annotations") && meta["annotations"].is_object()) {
    meta["annotations"].erase(api::kSubmittedByAnnotation);
    if (meta["annotations"].empty()) meta.erase("annotations");
  }
}

// ?dryRun=All (Kubernetes' server-side dry run): every check runs, nothing is stored. Sets
// `dry` and returns true; answers 400 and returns false for another value.
bool DryRun(const httplib::Request& req, httplib::Response& res, bool& dry) {
  const std::string v = req.get_param_value("dryRun");
  dry = v == "All";
  if (v.empty() || dry) return true;
  Fail(res, 400, "BadRequest", absl::StrCat("dryRun: \"", v, "\" is not supported (All)"),
       {{"dryRun", "must be All"}});
  return false;
}

}  // namespace

bool ApiServer::FitsTheFleet(const KindInfo& kind, const Json& obj, std::string_view path,
                             std::vector<api::FieldError>& errors, httplib::Response& res) {
  absl::StatusOr<std::vector<api::FieldError>> too_big = largest_node_.Check(kind, obj, path);
  if (!too_big.ok()) {
    FailStore(res, too_big.status(), "the fleet's nodes");
    return false;
  }
  for (api::FieldError& e : *too_big) errors.push_back(std::move(e));
  return true;
}

bool ApiServer::Admit(const KindInfo& kind, const std::string& name, const Json* obj,
                      httplib::Response& res) {
  if (!options_.admit) return true;
  absl::Status s = options_.admit(kind.kind, name, obj);
  if (s.ok()) return true;
  if (absl::IsInvalidArgument(s)) {
    Fail(res, 422, "Invalid", absl::StrCat(kind.kind, " \"", name, "\" is invalid: ", s.message()));
  } else {
    Fail(res, 500, "InternalError", s.message());
  }
  return false;
}

void ApiServer::HandleCreate(const Principal& who, const Route& r, const httplib::Request& req,
                             httplib::Response& res) {
  bool dry = false;
  if (!DryRun(req, res, dry)) return;
  absl::StatusOr<Json> body = api::ParseBody(req.body);
  if (!body.ok()) return Fail(res, 400, "BadRequest", body.status().message());
  body->erase("status");  // the control plane's
  std::vector<api::FieldError> errors = api::ValidateObject(*r.kind, *body, r.ns, "");
  if (errors.empty() && !FitsTheFleet(*r.kind, *body, "", errors, res)) return;
  if (!errors.empty()) {
    return Fail(res, 422, "Invalid",
                absl::StrCat(r.kind->kind, " is invalid: ", errors.front().ToString()), errors);
  }
  Json obj = std::move(*body);
  Json& meta = obj["metadata"];
  const std::string name = meta["name"].get<std::string>();
  if (!Admit(*r.kind, name, &obj, res)) return;
  if (r.kind->namespaced) meta["namespace"] = r.ns;
  meta["uid"] = NewUid();
  meta["creationTimestamp"] = api::FormatTimestamp(clock_.Now());
  meta.erase("resourceVersion");
  if (api::IsJobKind(*r.kind)) SetSubmittedBy(obj, &who.user);
  obj["status"] = InitialStatus(*r.kind);
  const std::string what = Describe(*r.kind, r.ns, name);
  std::string stored = api::ToStored(obj);
  int64_t rev = 0;
  absl::Status written = quotas_.Create({{r.kind, r.ns, 1}}, [&]() -> absl::Status {
    if (dry) {  // an existing object is still a conflict
      absl::StatusOr<store::KeyValue> cur = store_.Get(api::StoreKey(*r.kind, r.ns, name));
      if (cur.ok()) return absl::AlreadyExistsError("already exists");
      return absl::IsNotFound(cur.status()) ? absl::OkStatus() : cur.status();
    }
    absl::StatusOr<int64_t> created = store_.Create(api::StoreKey(*r.kind, r.ns, name), stored);
    if (created.ok()) rev = *created;
    return created.status();
  });
  if (dry) {
    if (!written.ok()) return FailStore(res, written, what);
    return ReplyStored(res, 201, stored, store_.CurrentRevision());
  }
  quotas_.Written(*r.kind);
  if (!written.ok()) return FailStore(res, written, what);
  if (r.kind->kind == "Node") largest_node_.NodeWritten(name, &obj["spec"]);
  ReplyStored(res, 201, stored, rev);
}

void ApiServer::HandleUpdate(const Principal& who, const Route& r, const httplib::Request& req,
                             httplib::Response& res) {
  bool dry = false;
  if (!DryRun(req, res, dry)) return;
  absl::StatusOr<Json> body = api::ParseBody(req.body);
  if (!body.ok()) return Fail(res, 400, "BadRequest", body.status().message());
  body->erase("status");  // kept as stored: PUT .../status writes it
  std::vector<api::FieldError> errors = api::ValidateObject(*r.kind, *body, r.ns, r.name);
  if (errors.empty() && !FitsTheFleet(*r.kind, *body, "", errors, res)) return;
  int64_t expected = errors.empty() ? ExpectedRevision(*body) : 0;
  if (expected < 0)
    errors.push_back({"metadata.resourceVersion", "must be a positive integer string"});
  if (!errors.empty()) {
    return Fail(res, 422, "Invalid",
                absl::StrCat(r.kind->kind, " is invalid: ", errors.front().ToString()), errors);
  }
  const std::string key = api::StoreKey(*r.kind, r.ns, r.name);
  const std::string what = Describe(*r.kind, r.ns, r.name);
  absl::StatusOr<store::KeyValue> cur = store_.Get(key);
  if (!cur.ok()) return FailStore(res, cur.status(), what);
  absl::StatusOr<Json> old = api::FromStored(cur->value, cur->mod_revision);
  if (!old.ok()) return FailStore(res, old.status(), what);
  if (expected == 0) expected = cur->mod_revision;  // unconditional, but atomic with this read
  Json obj = std::move(*body);
  if (who.role == Principal::Role::kNode && r.kind->kind == "Node") {
    errors = RestrictNodeSelfUpdate((*old)["spec"], obj["spec"]);
    if (!errors.empty()) {
      return Fail(res, 403, "Forbidden", absl::StrCat(what, ": ", errors.front().ToString()),
                  errors);
    }
  }
  // Server-owned fields are kept from the stored object, and so is the status.
  obj["metadata"]["uid"] = (*old)["metadata"]["uid"];
  obj["metadata"]["creationTimestamp"] = (*old)["metadata"]["creationTimestamp"];
  if (r.kind->namespaced) obj["metadata"]["namespace"] = r.ns;
  if (api::IsJobKind(*r.kind)) {
    const Json& old_meta = (*old)["metadata"];
    const Json* ann = old_meta.contains("annotations") ? &old_meta["annotations"] : nullptr;
    const bool had = ann != nullptr && ann->is_object() &&
                     ann->contains(api::kSubmittedByAnnotation) &&
                     (*ann)[api::kSubmittedByAnnotation].is_string();
    const std::string submitter = had ? (*ann)[api::kSubmittedByAnnotation].get<std::string>() : "";
    SetSubmittedBy(obj, had ? &submitter : nullptr);
  }
  obj["status"] = (*old).contains("status") ? (*old)["status"] : InitialStatus(*r.kind);
  if (!Admit(*r.kind, r.name, &obj, res)) return;
  std::string stored = api::ToStored(obj);
  if (dry) {
    if (expected != cur->mod_revision) {
      return FailStore(res, absl::FailedPreconditionError("revision mismatch"), what);
    }
    return ReplyStored(res, 200, stored, cur->mod_revision);
  }
  absl::StatusOr<int64_t> rev = store_.Put(key, stored, expected);
  quotas_.Written(*r.kind);
  if (!rev.ok()) return FailStore(res, rev.status(), what);
  if (r.kind->kind == "Node") largest_node_.NodeWritten(r.name, &obj["spec"]);
  ReplyStored(res, 200, stored, *rev);
}

void ApiServer::HandleUpdateStatus(const Principal& who, const Route& r,
                                   const httplib::Request& req, httplib::Response& res) {
  bool dry = false;
  if (!DryRun(req, res, dry)) return;
  absl::StatusOr<Json> body = api::ParseBody(req.body);
  if (!body.ok()) return Fail(res, 400, "BadRequest", body.status().message());
  // The body is the object (a GET result, edited) or just {"status": {...}}: only its status and
  // metadata.resourceVersion count.
  std::vector<api::FieldError> errors;
  if (!body->contains("status") || !(*body)["status"].is_object()) {
    errors.push_back({"status", "is required: the status to write"});
  } else {
    r.kind->object_schema.FieldSchema("status")->Validate((*body)["status"], "status", errors);
  }
  const int64_t precondition = errors.empty() ? ExpectedRevision(*body) : 0;
  if (precondition < 0) {
    errors.push_back({"metadata.resourceVersion", "must be a positive integer string"});
  }
  if (!errors.empty()) {
    return Fail(res, 422, "Invalid",
                absl::StrCat(r.kind->kind, " status is invalid: ", errors.front().ToString()),
                errors);
  }
  const std::string key = api::StoreKey(*r.kind, r.ns, r.name);
  const std::string what = Describe(*r.kind, r.ns, r.name);
  // Without a precondition the write merges into whatever is stored, so concurrent reporters
  // (the agents of one gang) never conflict: retried on a concurrent change.
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<store::KeyValue> cur = store_.Get(key);
    if (!cur.ok()) return FailStore(res, cur.status(), what);
    absl::StatusOr<Json> old = api::FromStored(cur->value, cur->mod_revision);
    if (!old.ok()) return FailStore(res, old.status(), what);
    if (precondition > 0 && precondition != cur->mod_revision) {
      return Fail(res, 409, "Conflict",
                  absl::StrCat(what, " has changed (resourceVersion ", cur->mod_revision, ", not ",
                               precondition, "); read it again"));
    }
    const Json stored_status = (*old).contains("status") ? (*old)["status"] : Json::object();
    StatusWriteResult w =
        MergeStatusWrite(*r.kind, who, stored_status, (*body)["status"], clock_.Now());
    if (!w.forbidden.empty()) {
      return Fail(res, 403, "Forbidden", absl::StrCat(what, ": ", w.forbidden.front().ToString()),
                  w.forbidden);
    }
    if (!w.invalid.empty()) {
      return Fail(res, 422, "Invalid",
                  absl::StrCat(r.kind->kind, " status is invalid: ", w.invalid.front().ToString()),
                  w.invalid);
    }
    if (!w.changed) return Reply(res, 200, *old);  // nothing new: no write, no revision
    Json obj = std::move(*old);
    obj["status"] = std::move(w.status);
    std::string stored = api::ToStored(obj);
    if (dry) return ReplyStored(res, 200, stored, cur->mod_revision);
    absl::StatusOr<int64_t> rev = store_.Put(key, stored, cur->mod_revision);
    if (rev.ok()) return ReplyStored(res, 200, stored, *rev);
    if (precondition > 0 || !absl::IsFailedPrecondition(rev.status()) || attempt >= 20) {
      return FailStore(res, rev.status(), what);
    }
  }
}

void ApiServer::HandleDelete(const Route& r, const httplib::Request& req, httplib::Response& res) {
  bool dry = false;
  if (!DryRun(req, res, dry)) return;
  int64_t precondition = 0;
  if (!QueryInt(req, "resourceVersion", precondition, res)) return;
  const std::string key = api::StoreKey(*r.kind, r.ns, r.name);
  const std::string what = Describe(*r.kind, r.ns, r.name);
  if (store_.Get(key).ok() && !Admit(*r.kind, r.name, nullptr, res)) return;
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<store::KeyValue> cur = store_.Get(key);
    if (!cur.ok()) return FailStore(res, cur.status(), what);
    if (r.kind->kind == "ModelVersion") {
      // A served ModelVersion stays (api/model_lineage.h): 409, nothing changed.
      absl::StatusOr<std::vector<std::string>> served = ServingModelVersion(r.ns, r.name);
      if (!served.ok()) return FailStore(res, served.status(), what);
      if (!served->empty()) {
        return Fail(res, 409, "Conflict", api::ServedDeletionMessage(r.name, *served));
      }
    }
    const int64_t expected = precondition > 0 ? precondition : cur->mod_revision;
    if (dry) {
      if (expected != cur->mod_revision) {
        return FailStore(res, absl::FailedPreconditionError("revision mismatch"), what);
      }
      absl::StatusOr<Json> obj = api::FromStored(cur->value, cur->mod_revision);
      if (!obj.ok()) return FailStore(res, obj.status(), what);
      return Reply(res, 200, *obj);
    }
    absl::StatusOr<int64_t> rev = store_.Delete(key, expected);
    quotas_.Written(*r.kind);
    if (rev.ok() && r.kind->kind == "Node") largest_node_.NodeWritten(r.name, nullptr);
    if (rev.ok()) {
      absl::StatusOr<Json> obj = api::FromStored(cur->value, *rev);
      if (!obj.ok()) return FailStore(res, obj.status(), what);
      return Reply(res, 200, *obj);
    }
    // Without a precondition a concurrent write is retried, not reported.
    if (precondition > 0 || !absl::IsFailedPrecondition(rev.status()) || attempt >= 10) {
      return FailStore(res, rev.status(), what);
    }
  }
}

absl::StatusOr<std::vector<std::string>> ApiServer::ServingModelVersion(const std::string& ns,
                                                                        const std::string& name) {
  const api::KindInfo* kind = api::KindByPlural("inferenceservices");
  std::vector<Json> services;
  store::ListOptions opts;
  while (kind != nullptr) {
    absl::StatusOr<store::ListResult> page = store_.List(api::StorePrefix(*kind, ns), opts);
    if (!page.ok()) return page.status();
    for (const store::KeyValue& kv : page->kvs) {
      Json obj = Json::parse(kv.value, nullptr, /*allow_exceptions=*/false);
      if (obj.is_object()) services.push_back(std::move(obj));
    }
    if (!page->more) break;
    opts.continue_after = page->next_key;
  }
  std::vector<const Json*> ptrs;
  for (const Json& s : services) ptrs.push_back(&s);
  return api::ServingInferenceServices(name, ptrs);
}

// POST /api/v1/batch {"items": [object, ...]}: creates every object in one
// store Txn -- all or nothing, one resourceVersion for all.
void ApiServer::HandleBatch(const Principal& p, const httplib::Request& req,
                            httplib::Response& res) {
  bool dry = false;
  if (!DryRun(req, res, dry)) return;
  absl::StatusOr<Json> body = api::ParseBody(req.body);
  if (!body.ok()) return Fail(res, 400, "BadRequest", body.status().message());
  if (body->size() != 1 || !body->contains("items") || !(*body)["items"].is_array() ||
      (*body)["items"].empty()) {
    return Fail(res, 422, "Invalid", "batch: body must be {\"items\": [object, ...]}",
                {{"items", "must be a non-empty array of objects"}});
  }
  Json& items = (*body)["items"];
  std::vector<store::Op> ops;
  std::vector<QuotaGate::Demand> demands;  // objects per kind and namespace, for quotas
  std::vector<api::FieldError> errors;
  for (size_t i = 0; i < items.size(); ++i) {
    Json& obj = items[i];
    const std::string path = absl::StrCat("items[", i, "]");
    const KindInfo* kind = nullptr;
    if (obj.is_object() && obj.contains("kind") && obj["kind"].is_string()) {
      for (const KindInfo& k : api::AllKinds()) {
        if (k.kind == obj["kind"].get<std::string>()) kind = &k;
      }
    }
    if (kind == nullptr) {
      errors.push_back({path + ".kind", "must name a known kind"});
      continue;
    }
    std::string ns;
    if (kind->namespaced && obj.contains("metadata") && obj["metadata"].is_object() &&
        obj["metadata"].contains("namespace") && obj["metadata"]["namespace"].is_string()) {
      ns = obj["metadata"]["namespace"].get<std::string>();
    }
    if (kind->namespaced && ns.empty()) {
      errors.push_back({path + ".metadata.namespace", "is required in a batch"});
      continue;
    }
    if (obj.is_object()) obj.erase("status");  // the control plane's
    std::vector<api::FieldError> item_errors = api::ValidateObject(*kind, obj, ns, "");
    for (api::FieldError& e : item_errors) {
      errors.push_back({absl::StrCat(path, e.field.empty() ? "" : ".", e.field), e.message});
    }
    if (!item_errors.empty()) continue;
    const size_t before = errors.size();
    if (!FitsTheFleet(*kind, obj, path, errors, res)) return;
    if (errors.size() > before) continue;
    const std::string name = obj["metadata"]["name"].get<std::string>();
    if (std::string why =
            Authorize(p, Verb::kCreate,
                      Resource{kind->plural, kind->namespaced, kind->namespaced ? ns : "", name});
        !why.empty()) {
      return Fail(res, 403, "Forbidden", absl::StrCat(path, ": ", why));
    }
    Json& meta = obj["metadata"];
    meta["uid"] = NewUid();
    meta["creationTimestamp"] = api::FormatTimestamp(clock_.Now());
    meta.erase("resourceVersion");
    if (api::IsJobKind(*kind)) SetSubmittedBy(obj, &p.user);
    obj["status"] = InitialStatus(*kind);
    ops.push_back(store::Op::Create(api::StoreKey(*kind, ns, name), api::ToStored(obj)));
    auto d = std::find_if(demands.begin(), demands.end(),
                          [&](const QuotaGate::Demand& x) { return x.kind == kind && x.ns == ns; });
    if (d == demands.end()) d = demands.insert(demands.end(), QuotaGate::Demand{kind, ns, 0});
    ++d->count;
  }
  if (!errors.empty()) {
    return Fail(res, 422, "Invalid", absl::StrCat("batch is invalid: ", errors.front().ToString()),
                errors);
  }
  absl::StatusOr<int64_t> rev = 0;
  absl::Status written = quotas_.Create(demands, [&]() -> absl::Status {
    if (dry) {
      for (const store::Op& op : ops) {
        absl::StatusOr<store::KeyValue> cur = store_.Get(op.key);
        if (cur.ok()) return absl::AlreadyExistsError(absl::StrCat(op.key, " already exists"));
        if (!absl::IsNotFound(cur.status())) return cur.status();
      }
      rev = store_.CurrentRevision();
      return absl::OkStatus();
    }
    rev = store_.Txn(ops);
    return rev.status();
  });
  for (const QuotaGate::Demand& d : demands) quotas_.Written(*d.kind);
  if (written.ok() && !dry) {
    for (Json& obj : items) {
      if (obj["kind"] == "Node") largest_node_.NodeWritten(obj["metadata"]["name"], &obj["spec"]);
    }
  }
  if (!written.ok()) {
    if (absl::IsInvalidArgument(written)) {
      return Fail(res, 422, "Invalid", absl::StrCat("batch: ", written.message()));
    }
    return FailStore(res, written, "an object of the batch");
  }
  for (Json& obj : items) obj["metadata"]["resourceVersion"] = std::to_string(*rev);
  Reply(res, 201,
        {{"apiVersion", api::kApiVersion},
         {"kind", "List"},
         {"metadata", {{"resourceVersion", std::to_string(*rev)}}},
         {"items", std::move(items)}});
}

}  // namespace tessera::server
