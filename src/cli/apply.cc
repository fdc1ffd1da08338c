// `tessera apply -f FILE|DIR|-`: every object of every file is read and checked against the
// API's schema first (all errors at once, each with its file and line); only when all are valid
// is anything sent. The server may still refuse an object (a Queue that would break the tree, a
// conflict): each object's result is printed and the exit code is 1 when any failed, or when
// there was nothing to apply (docs/control-plane.md, "CLI").
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/kinds.h"
#include "api/object_codec.h"
#include "cli/cli_internal.h"
#include "cli/yaml_json.h"
#include "common/suggest.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

struct ApplyFlags {
  ConfigFlags conn;
  std::vector<std::string> files;
  std::string dry_run = "none";
};

// One manifest file's text.
struct Source {
  std::string name;  // as given ("-" for stdin), or DIR/FILE
  std::string text;
};

// At most kMaxManifestBytes of `in`; an error for more (`-f /dev/zero`).
absl::StatusOr<std::string> ReadBounded(std::istream& in) {
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxManifestBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("larger than ", kMaxManifestBytes >> 20, " MiB: refused"));
    }
  }
  if (in.bad()) return absl::InvalidArgumentError("cannot be read");
  return text;
}

// The sources `arg` names: stdin, a file, or a directory's *.yaml, *.yml and *.json files
// (sorted, not recursive, as kubectl reads a directory).
absl::Status AddSources(const std::string& arg, std::vector<Source>* out) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (arg != "-" && fs::is_directory(arg, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(arg, ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file(ec) && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
        paths.push_back(e.path().string());
      }
    }
    if (ec) return absl::InvalidArgumentError(absl::StrCat(arg, ": ", ec.message()));
    if (paths.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(arg, ": a directory without *.yaml, *.yml or *.json files"));
    }
    std::sort(paths.begin(), paths.end());
  } else {
    paths.push_back(arg);
  }
  for (const std::string& p : paths) {
    absl::StatusOr<std::string> text;
    if (p == "-") {
      text = ReadBounded(std::cin);
    } else {
      std::ifstream in(p, std::ios::binary);
      if (!in) return absl::InvalidArgumentError(absl::StrCat(p, ": cannot be read"));
      text = ReadBounded(in);
    }
    if (!text.ok())
      return absl::InvalidArgumentError(absl::StrCat(p, ": ", text.status().message()));
    out->push_back({p, *std::move(text)});
  }
  return absl::OkStatus();
}

// "FILE:LINE: rest" from a parse error "line LINE: rest".
std::string AtLine(const std::string& file, absl::string_view msg) {
  int line = 0;
  const size_t colon = msg.find(": ");
  if (absl::StartsWith(msg, "line ") && colon != absl::string_view::npos &&
      absl::SimpleAtoi(msg.substr(5, colon - 5), &line)) {
    return absl::StrCat(file, ":", line, ": ", msg.substr(colon + 2));
  }
  return absl::StrCat(file, ": ", msg);
}

// One object to apply.
struct Item {
  const Source* src = nullptr;
  Manifest m;
  const ResourceInfo* r = nullptr;
  std::string ns, name;
  // "FILE:LINE: trainingjob/NAME" for messages about the whole object.
  std::string Where(const std::string& path = "") const {
    return absl::StrCat(src->name, ":", m.LineOf(path), ": ",
                        absl::AsciiStrToLower(r != nullptr ? r->kind : "object"), "/", name);
  }
};

std::string Kind(const Json& obj) {
  auto it = obj.find("kind");
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

// Checks `item` as the server will, appending "FILE:LINE: ..." per error; fills in its
// resource, namespace and name and strips what the control plane owns.
void Check(Item& item, const std::string& default_ns, std::vector<std::string>* errors) {
  Json& obj = item.m.object;
  const std::string& file = item.src->name;
  const Json* meta = obj.contains("metadata") ? &obj["metadata"] : nullptr;
  if (meta != nullptr && meta->is_object() && meta->contains("name") &&
      (*meta)["name"].is_string()) {
    item.name = (*meta)["name"].get<std::string>();
  }
  const std::string kind = Kind(obj);
  item.r = ResourceForKind(kind);
  const api::KindInfo* info = item.r != nullptr ? api::KindByPlural(item.r->plural) : nullptr;
  if (info == nullptr) {
    std::vector<std::string> kinds;
    for (const api::KindInfo& k : api::AllKinds()) kinds.push_back(k.kind);
    errors->push_back(absl::StrCat(file, ":", item.m.LineOf("kind"), ": kind: ",
                                   obj.contains("kind")
                                       ? absl::StrCat("unknown kind ", obj["kind"].dump())
                                       : std::string("is required"),
                                   DidYouMean(kind, kinds)));
    return;
  }
  // apply owns spec and metadata; status belongs to the control plane.
  obj.erase("status");
  if (obj.contains("metadata") && obj["metadata"].is_object()) {
    Json& md = obj["metadata"];
    md.erase("resourceVersion");
    if (item.r->namespaced && !md.contains("namespace")) md["namespace"] = default_ns;
    if (item.r->namespaced && md["namespace"].is_string()) item.ns = md["namespace"];
  }
  if (item.r->namespaced && item.ns.empty()) item.ns = default_ns;
  for (const api::FieldError& e : api::ValidateObject(*info, obj, item.ns, "")) {
    errors->push_back(absl::StrCat(item.Where(e.field), ": ", e.ToString()));
  }
}

// The server's refusal of `item`, every cause on a line of its own with the manifest's line.
std::string Refusal(const Item& item, const Response& res) {
  std::string out = absl::StrCat("error: ", item.Where(), ": ", ErrorText(res));
  if (res.body.is_object() && res.body.contains("details") && res.body["details"].is_object() &&
      res.body["details"].contains("causes") && res.body["details"]["causes"].is_array() &&
      !res.body["details"]["causes"].empty()) {
    for (const Json& c : res.body["details"]["causes"]) {
      const std::string field = c.value("field", "");
      absl::StrAppend(&out, "\n  ", item.src->name, ":", item.m.LineOf(field), ": ",
                      api::FieldError{field, c.value("message", "")}.ToString());
    }
  }
  return out;
}

// Warns about a job whose spec.queue is no Queue object but within a typo of one: the job would
// wait for a queue that does not exist (docs/control-plane.md, "Queues in the server"). Only a
// warning: queues of the server's --queue-config are not objects the CLI can list.
void WarnAboutQueueTypos(ApiClient& client, const std::vector<Item>& items) {
  std::vector<std::string> queues;
  bool listed = false;
  for (const Item& item : items) {
    const Json& obj = item.m.object;
    if (item.r->kind != "TrainingJob" && item.r->kind != "InferenceService") continue;
    const auto spec = obj.find("spec");
    if (spec == obj.end() || !spec->contains("queue") || !(*spec)["queue"].is_string()) continue;
    const std::string queue = (*spec)["queue"].get<std::string>();
    // `default` always exists (implicit when not configured): never a typo, and not worth the
    // round trip that lists the queues (an apply of one job is three requests otherwise).
    if (queue == "default") continue;
    if (!listed) {
      listed = true;
      absl::StatusOr<std::vector<Json>> l = ListAll(client, *FindResource("queues"), "", true, "");
      if (!l.ok()) return;
      for (const Json& q : *l) queues.push_back(q["metadata"].value("name", ""));
      for (const Item& other : items) {  // queues created by this apply
        if (other.r->kind == "Queue") queues.push_back(other.name);
      }
    }
    if (std::find(queues.begin(), queues.end(), queue) != queues.end()) continue;
    const std::string near = ClosestMatch(queue, queues);
    if (near.empty()) continue;
    std::cerr << "warning: " << item.Where("spec.queue") << ": spec.queue: no queue \"" << queue
              << "\"; did you mean \"" << near << "\"? (the job waits until the queue exists)\n";
  }
}

}  // namespace

std::vector<NamedObject> ReadObjectNames(const std::vector<std::string>& files,
                                         const std::string& default_ns,
                                         std::vector<std::string>* errors) {
  std::vector<NamedObject> out;
  std::vector<Source> sources;
  for (const std::string& file : files) {
    if (absl::Status s = AddSources(file, &sources); !s.ok()) {
      errors->push_back(std::string(s.message()));
    }
  }
  for (const Source& src : sources) {
    absl::StatusOr<std::vector<Manifest>> docs = ParseManifestsWithLines(src.text);
    if (!docs.ok()) {
      errors->push_back(AtLine(src.name, docs.status().message()));
      continue;
    }
    for (const Manifest& m : *docs) {
      const Json& obj = m.object;
      NamedObject o;
      o.r = ResourceForKind(Kind(obj));
      const std::string where = absl::StrCat(src.name, ":", m.LineOf(""));
      if (o.r == nullptr) {
        errors->push_back(absl::StrCat(where, ": kind: unknown kind \"", Kind(obj), "\""));
        continue;
      }
      const Json meta = obj.value("metadata", Json::object());
      if (!meta.is_object() || !meta.contains("name") || !meta["name"].is_string()) {
        errors->push_back(absl::StrCat(where, ": metadata.name: is required"));
        continue;
      }
      o.name = meta["name"].get<std::string>();
      if (o.r->namespaced) {
        o.ns = meta.contains("namespace") && meta["namespace"].is_string()
                   ? meta["namespace"].get<std::string>()
                   : default_ns;
      }
      o.where = where;
      out.push_back(std::move(o));
    }
  }
  return out;
}

void AddDryRunFlag(CLI::App* cmd, std::string* mode) {
  cmd->add_flag("--dry-run{client}", *mode,
                "--dry-run[=client|server|none]: client checks here and prints what would be "
                "done; server has the server check everything (schema, quotas, the fleet) and "
                "store nothing")
      ->check(CLI::IsMember({"none", "client", "server"}));
}

std::string DryRunQuery(const std::string& mode, const char* sep) {
  return mode == "server" ? absl::StrCat(sep, "dryRun=All") : "";
}

std::string DryRunSuffix(const std::string& mode) {
  if (mode == "client") return " (dry run)";
  if (mode == "server") return " (server dry run)";
  return "";
}

namespace {

// Many objects, most often all new: one POST /api/v1/batch per kBatchSize objects (each all or
// nothing, one store transaction) instead of a GET and a POST per object. A batch the server
// refuses (an object that exists already, one it finds invalid, a quota) leaves its objects to
// the one-by-one path, which updates what exists and says which object is refused and why.
// Which items were created; none with one object or a client dry run.
std::vector<bool> CreateInBatches(ApiClient& client, const std::vector<Item>& items,
                                  const std::string& dry_run) {
  constexpr size_t kBatchSize = 100;  // well inside the store's transaction limits
  std::vector<bool> created(items.size(), false);
  if (items.size() < 2 || dry_run == "client") return created;
  for (size_t start = 0; start < items.size(); start += kBatchSize) {
    const size_t end = std::min(items.size(), start + kBatchSize);
    Json objects = Json::array();
    for (size_t i = start; i < end; ++i) {
      Json o = items[i].m.object;
      if (items[i].r->namespaced) o["metadata"]["namespace"] = items[i].ns;
      objects.push_back(std::move(o));
    }
    const Json body = {{"items", std::move(objects)}};
    absl::StatusOr<Response> res =
        client.Do("POST", "/api/v1/batch" + DryRunQuery(dry_run, "?"), &body);
    if (!res.ok() || res->code != 201) continue;
    for (size_t i = start; i < end; ++i) {
      created[i] = true;
      std::cout << absl::AsciiStrToLower(items[i].r->kind) << ".tessera.dev/" << items[i].name
                << " created" << DryRunSuffix(dry_run) << "\n";
    }
  }
  return created;
}

void RunApply(const ApplyFlags& f) {
  ApiClient client = MakeClient(f.conn);
  std::vector<Source> sources;
  std::vector<std::string> errors;
  for (const std::string& file : f.files) {
    if (absl::Status s = AddSources(file, &sources); !s.ok()) {
      errors.push_back(std::string(s.message()));
    }
  }
  std::vector<Item> items;
  for (const Source& src : sources) {
    absl::StatusOr<std::vector<Manifest>> docs = ParseManifestsWithLines(src.text);
    if (!docs.ok()) {
      errors.push_back(AtLine(src.name, docs.status().message()));
      continue;
    }
    for (Manifest& m : *docs) {
      items.push_back(Item{&src, std::move(m)});
      Check(items.back(), client.config().ns, &errors);
    }
  }
  if (!errors.empty()) {
    for (const std::string& e : errors) std::cerr << "error: " << e << "\n";
    Die(absl::StrCat("error: nothing applied: ", errors.size(), " error(s)"));
  }
  if (items.empty()) Die("error: no objects passed to apply");
  WarnAboutQueueTypos(client, items);
  const std::vector<bool> created = CreateInBatches(client, items, f.dry_run);
  size_t failed = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (created[i]) continue;
    Item& item = items[i];
    const ResourceInfo& r = *item.r;
    const std::string what =
        absl::StrCat(absl::AsciiStrToLower(r.kind), ".tessera.dev/", item.name);
    absl::StatusOr<Response> cur = client.Do("GET", ItemPath(r, item.ns, item.name));
    absl::StatusOr<Response> res = cur;
    if (cur.ok() && f.dry_run == "client") {
      // Checked here against the schema only: report what would happen.
      res = Response{cur->code == 404 ? 201 : 200, Json::object()};
    } else if (cur.ok()) {
      const Json& obj = item.m.object;
      const std::string dry = DryRunQuery(f.dry_run, "?");
      res = cur->code == 404 ? client.Do("POST", CollectionPath(r, item.ns, false) + dry, &obj)
                             : client.Do("PUT", ItemPath(r, item.ns, item.name) + dry, &obj);
    }
    if (!res.ok()) Die(absl::StrCat("error: ", res.status().message()));
    if (res->code == 200 || res->code == 201) {
      std::cout << what << (res->code == 201 ? " created" : " configured")
                << DryRunSuffix(f.dry_run) << "\n";
    } else {
      std::cerr << Refusal(item, *res) << "\n";
      ++failed;
    }
  }
  if (failed > 0) {
    Die(absl::StrCat("error: ", failed, " of ", items.size(), " object(s) not applied"));
  }
}

}  // namespace

void RegisterApplyCommand(CLI::App& app) {
  auto f = std::make_shared<ApplyFlags>();
  CLI::App* cmd = app.add_subcommand("apply", "Create or update objects from YAML/JSON files");
  cmd->add_option("-f,--filename", f->files,
                  "Manifest file, directory (its *.yaml, *.yml, *.json) or - for stdin")
      ->required();
  AddDryRunFlag(cmd, &f->dry_run);
  AddConnectionFlags(cmd, &f->conn);
  cmd->footer(
      "Examples:\n"
      "  tessera apply -f job.yaml\n"
      "  tessera apply -f manifests/ --dry-run=server   # the server checks, nothing is stored\n"
      "  cat job.yaml | tessera apply -f -");
  cmd->callback([f] { RunApply(*f); });
}

}  // namespace tessera::cli
