#include "cli/cli_commands.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json_fields.h"
#include "api/kinds.h"
#include "cli/cli_internal.h"
#include "cli/yaml_json.h"
#include "common/clock.h"

namespace tessera::cli {

// --- Shared helpers ---------------------------------------------------------

void Die(const std::string& msg) {
  std::cerr << msg << "\n";
  throw CLI::RuntimeError(1);
}

void AddConnectionFlags(CLI::App* cmd, ConfigFlags* f) {
  cmd->add_option("--server,-s", f->server,
                  "API server URL (http://HOST:PORT or https://...); replicas: several, "
                  "comma-separated, tried in turn when one cannot be reached");
  cmd->add_option("--ca-file", f->ca_file, "PEM CA bundle to verify an https:// server with");
  cmd->add_flag("--insecure-skip-tls-verify", f->insecure_skip_tls_verify,
                "Do not verify the https:// server's certificate (testing only)");
  cmd->add_option("--token", f->token, "Bearer token");
  cmd->add_option("--namespace,-n", f->ns, "Namespace");
  cmd->add_option("--config", f->config_file, "Config file (default ~/.tessera/config)");
  cmd->add_option("--context", f->context, "Context of the config file to use");
}

ApiClient MakeClient(const ConfigFlags& flags) {
  absl::StatusOr<ClientConfig> c = ResolveConfig(flags);
  if (!c.ok()) Die(absl::StrCat("error: ", c.status().message()));
  return ApiClient(*std::move(c));
}

std::string SelectorQuery(const std::string& labels, const std::string& fields) {
  std::string q;
  if (!labels.empty()) absl::StrAppend(&q, "&labelSelector=", QueryEscape(labels));
  if (!fields.empty()) absl::StrAppend(&q, "&fieldSelector=", QueryEscape(fields));
  return q;
}

absl::Status ForEachPage(ApiClient& client, const ResourceInfo& r, const std::string& ns,
                         bool all_namespaces, const std::string& selector,
                         const std::string& field_selector, const std::string& extra_query,
                         const std::string& accept, std::string* revision,
                         absl::FunctionRef<bool(Json& body)> page) {
  std::string cont;
  while (true) {
    std::string path =
        absl::StrCat(CollectionPath(r, ns, all_namespaces), "?limit=500", extra_query);
    absl::StrAppend(&path, SelectorQuery(selector, field_selector));
    if (!cont.empty()) absl::StrAppend(&path, "&continue=", QueryEscape(cont));
    absl::StatusOr<Response> res = client.Do("GET", path, nullptr, accept);
    if (!res.ok()) return res.status();
    if (res->code != 200) return absl::InternalError(ErrorText(*res));
    const Json& meta = api::Sub(res->body, "metadata");
    // The first page's revision: the whole list is consistent at it (continue keeps it).
    if (revision != nullptr && revision->empty()) *revision = api::StrOr(meta, "resourceVersion");
    cont = api::StrOr(meta, "continue");
    if (!page(res->body) || cont.empty()) return absl::OkStatus();
  }
}

absl::StatusOr<std::vector<Json>> ListAll(ApiClient& client, const ResourceInfo& r,
                                          const std::string& ns, bool all_namespaces,
                                          const std::string& selector,
                                          const std::string& field_selector,
                                          std::string* revision) {
  std::vector<Json> items;
  absl::Status s = ForEachPage(client, r, ns, all_namespaces, selector, field_selector, "", "",
                               revision, [&items](Json& body) {
                                 for (Json& item : body["items"]) items.push_back(std::move(item));
                                 return true;
                               });
  if (!s.ok()) return s;
  return items;
}

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
}

Response GetJob(ApiClient& client, const std::string& ns, const std::string& name,
                const std::string& kind) {
  Response last;
  for (const char* k : {"TrainingJob", "InferenceService"}) {
    if (!kind.empty() && kind != k) continue;
    absl::StatusOr<Response> r = client.Do("GET", ItemPath(*ResourceForKind(k), ns, name));
    if (!r.ok()) Die(absl::StrCat("error: ", r.status().message()));
    last = *std::move(r);
    if (last.code != 404) break;
  }
  return last;
}

bool IsTerminal(const std::string& phase) { return phase == "Succeeded" || phase == "Failed"; }

void AddPlacedMilli(const Json& job, std::vector<std::pair<std::string, int64_t>>* out) {
  if (!job.contains("status") || !job["status"].contains("placement")) return;
  for (const Json& m : job["status"]["placement"]) {
    int64_t milli = m.value("gpuMilli", 1000) * static_cast<int64_t>(m["gpus"].size());
    out->emplace_back(m.value("node", ""), milli);
  }
}

namespace {

// --- delete -------------------------------------------------------------

struct DeleteFlags {
  ConfigFlags conn;
  std::string resource;
  std::vector<std::string> names;
  std::vector<std::string> files;
  std::string selector;
  bool all = false;
  bool all_namespaces = false;
  std::string dry_run = "none";
};

// kubectl's forms: `delete RESOURCE NAME...`, `delete RESOURCE -l SEL | --all [-A]`,
// `delete -f FILE|DIR`. Each object's result is printed; the exit code is 1 when any could not
// be deleted (the rest are still tried), or when a form selects nothing by name that exists.
void RunDelete(const DeleteFlags& f) {
  // `tessera delete -f x.yaml` parses x.yaml's path as the resource argument when it comes
  // first; with -f every positional is a file name too.
  if (!f.files.empty() && !f.resource.empty()) {
    Die("error: give either -f FILE or RESOURCE NAME..., not both");
  }
  const int forms = (!f.names.empty()) + (!f.selector.empty()) + f.all + (!f.files.empty());
  if (forms != 1) {
    Die("error: say what to delete: RESOURCE NAME..., RESOURCE -l SELECTOR, RESOURCE --all, "
        "or -f FILE");
  }
  ApiClient client = MakeClient(f.conn);
  std::vector<NamedObject> targets;
  if (!f.files.empty()) {
    std::vector<std::string> errors;
    targets = ReadObjectNames(f.files, client.config().ns, &errors);
    if (!errors.empty()) {
      for (const std::string& e : errors) std::cerr << "error: " << e << "\n";
      Die(absl::StrCat("error: nothing deleted: ", errors.size(), " error(s)"));
    }
    if (targets.empty()) Die("error: no objects passed to delete");
  } else {
    const ResourceInfo* r = FindResource(f.resource);
    if (r == nullptr) Die(absl::StrCat("error: unknown resource type \"", f.resource, "\""));
    if (!f.names.empty()) {
      for (const std::string& name : f.names) {
        targets.push_back({r, r->namespaced ? client.config().ns : "", name, ""});
      }
    } else {
      absl::StatusOr<std::vector<Json>> l =
          ListAll(client, *r, client.config().ns, f.all_namespaces, f.selector);
      if (!l.ok()) Die(std::string(l.status().message()));
      for (const Json& o : *l) {
        targets.push_back(
            {r, o["metadata"].value("namespace", ""), o["metadata"].value("name", ""), ""});
      }
      if (targets.empty()) {
        std::cerr << "No resources found\n";
        return;
      }
    }
  }
  bool failed = false;
  for (const NamedObject& t : targets) {
    const std::string what =
        absl::StrCat(absl::AsciiStrToLower(t.r->kind), ".tessera.dev \"", t.name, "\"");
    absl::StatusOr<Response> res;
    if (f.dry_run == "client") {
      res = client.Do("GET", ItemPath(*t.r, t.ns, t.name));
    } else {
      res = client.Do("DELETE", ItemPath(*t.r, t.ns, t.name) + DryRunQuery(f.dry_run, "?"));
    }
    if (!res.ok()) Die(std::string(res.status().message()));
    if (res->code == 200) {
      std::cout << what << " deleted" << DryRunSuffix(f.dry_run) << "\n";
    } else {
      std::cerr << (t.where.empty() ? "" : t.where + ": ") << ErrorText(*res) << "\n";
      failed = true;
    }
  }
  if (failed) throw CLI::RuntimeError(1);
}

}  // namespace

void RegisterCliCommands(CLI::App& app) {
  RegisterApplyCommand(app);
  RegisterGetCommand(app);
  {
    auto f = std::make_shared<DeleteFlags>();
    CLI::App* cmd = app.add_subcommand("delete", "Delete objects by name, label, file or all");
    cmd->add_option("resource", f->resource, "Resource type");
    cmd->add_option("names", f->names, "Names");
    cmd->add_option("-f,--filename", f->files,
                    "Delete the objects a manifest file, directory or - (stdin) names");
    cmd->add_option("-l,--selector", f->selector, "Delete the objects matching a label selector");
    cmd->add_flag("--all", f->all, "Delete every object of the resource type in the namespace");
    cmd->add_flag("-A,--all-namespaces", f->all_namespaces, "With -l or --all: in every namespace");
    AddDryRunFlag(cmd, &f->dry_run);
    AddConnectionFlags(cmd, &f->conn);
    cmd->footer(
        "Examples:\n"
        "  tessera delete jobs llama-7b\n"
        "  tessera delete -f job.yaml\n"
        "  tessera delete jobs -l team=nlp --dry-run=server\n"
        "  tessera delete jobs --all");
    cmd->callback([f] { RunDelete(*f); });
  }
  RegisterNodeCommands(app);
  RegisterDescribeCommands(app);
  RegisterTopCommands(app);
  RegisterLogsCommand(app);
  RegisterExplainCommand(app);
  RegisterSlurmCommands(app);
  RegisterCompletionCommand(app);
}

}  // namespace tessera::cli
