// `tessera get`: lists and shows objects in kubectl's habits -- tables (-o wide), json, yaml,
// name, jsonpath and custom-columns outputs, label and field selectors, --sort-by, and -w to
// follow changes (a watch from the list's revision, resumed where it left off when the server
// ends it).
#include <algorithm>
#include <memory>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/json_fields.h"
#include "api/kinds.h"
#include "cli/cli_internal.h"
#include "cli/jsonpath.h"
#include "cli/yaml_json.h"
#include "common/clock.h"

namespace tessera::cli {
namespace {

std::string Meta(const Json& obj, const char* key) {
  return obj.contains("metadata") ? obj["metadata"].value(key, "") : "";
}

// --- get ----------------------------------------------------------------

struct GetFlags {
  ConfigFlags conn;
  std::string resource;
  std::vector<std::string> names;
  std::string output;
  std::string selector;
  std::string field_selector;
  std::string sort_by;
  bool all_namespaces = false;
  bool no_headers = false;
  bool watch = false;
  double request_timeout = 0;  // seconds; 0: none (a watch runs until interrupted)
};

// The indices of the columns shown: the default ones, and with -o wide all of them.
std::vector<size_t> Shown(const std::vector<api::TableColumn>& columns, bool wide) {
  std::vector<size_t> out;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (wide || columns[i].priority == 0) out.push_back(i);
  }
  return out;
}

std::vector<std::string> Pick(const std::vector<std::string>& all,
                              const std::vector<size_t>& shown) {
  std::vector<std::string> out;
  out.reserve(shown.size());
  for (size_t i : shown) out.push_back(i < all.size() ? all[i] : "");
  return out;
}

std::vector<std::string> Header(const ResourceInfo& r, bool wide) {
  const std::vector<api::TableColumn>& columns = api::TableColumns(r.kind);
  std::vector<std::string> names;
  names.reserve(columns.size());
  for (const api::TableColumn& c : columns) names.push_back(c.name);
  return Pick(names, Shown(columns, wide));
}

std::vector<std::string> Row(const ResourceInfo& r, const Json& o, bool wide, absl::Time now) {
  return Pick(api::TableCells(r.kind, o, now), Shown(api::TableColumns(r.kind), wide));
}

// A list as the server printed it (a meta.k8s.io/v1 Table).
struct PrintedList {
  std::vector<api::TableColumn> columns;
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;  // namespace, cells
};

// Lists page by page as a Table, the way kubectl asks (the server computes the cells: no
// object crosses the wire). nullopt when the server answers with objects instead (one that
// does not print tables); `revision` as ListAll's.
absl::StatusOr<std::optional<PrintedList>> ListPrinted(ApiClient& client, const ResourceInfo& r,
                                                       const std::string& ns, bool all_namespaces,
                                                       const std::string& selector,
                                                       const std::string& field_selector,
                                                       std::string* revision) {
  PrintedList out;
  bool table = true;
  // Each row's object metadata only for its namespace, which only -A shows.
  absl::Status s = ForEachPage(
      client, r, ns, all_namespaces, selector, field_selector,
      all_namespaces ? "" : "&includeObject=None", api::kTableAccept, revision, [&](Json& body) {
        table = api::StrOr(body, "kind") == "Table";
        if (!table) return false;
        if (out.columns.empty()) {
          for (const Json& c : api::Items(body, "columnDefinitions")) {
            out.columns.push_back(
                {api::StrOr(c, "name"), "", static_cast<int>(api::IntOr(c, "priority", 0))});
          }
        }
        for (const Json& row : api::Items(body, "rows")) {
          std::vector<std::string> cells;
          for (const Json& c : api::Items(row, "cells")) {
            cells.push_back(c.is_string() ? c.get<std::string>() : c.dump());
          }
          out.rows.emplace_back(
              api::StrOr(api::Sub(api::Sub(row, "object"), "metadata"), "namespace"),
              std::move(cells));
        }
        return true;
      });
  if (!s.ok()) return s;
  if (!table) return std::nullopt;
  return out;
}

// How objects are printed, parsed once from -o.
struct Printer {
  enum class Kind { kTable, kWide, kJson, kYaml, kName, kJsonPath, kCustomColumns } kind;
  std::optional<JsonPathTemplate> tmpl;
  std::vector<std::pair<std::string, std::vector<PathStep>>> columns;  // custom-columns
};

Printer ParseOutput(const std::string& out) {
  Printer p{Printer::Kind::kTable, std::nullopt, {}};
  if (out.empty()) return p;
  if (out == "wide") p.kind = Printer::Kind::kWide;
  if (out == "json") p.kind = Printer::Kind::kJson;
  if (out == "yaml") p.kind = Printer::Kind::kYaml;
  if (out == "name") p.kind = Printer::Kind::kName;
  if (absl::StartsWith(out, "jsonpath=")) {
    absl::StatusOr<JsonPathTemplate> t = JsonPathTemplate::Parse(out.substr(9));
    if (!t.ok()) Die(absl::StrCat("error: -o ", out, ": ", t.status().message()));
    p.kind = Printer::Kind::kJsonPath;
    p.tmpl = *std::move(t);
  } else if (absl::StartsWith(out, "custom-columns=")) {
    p.kind = Printer::Kind::kCustomColumns;
    for (absl::string_view col : absl::StrSplit(out.substr(15), ',')) {
      std::pair<absl::string_view, absl::string_view> hp =
          absl::StrSplit(col, absl::MaxSplits(':', 1));
      if (hp.first.empty() || hp.second.empty()) {
        Die(absl::StrCat("error: -o custom-columns: \"", col,
                         "\" must be HEADER:PATH, e.g. NAME:.metadata.name"));
      }
      absl::StatusOr<std::vector<PathStep>> path = ParsePath(hp.second);
      if (!path.ok()) Die(absl::StrCat("error: -o custom-columns: ", path.status().message()));
      p.columns.emplace_back(std::string(hp.first), *std::move(path));
    }
  } else if (p.kind == Printer::Kind::kTable) {
    Die(absl::StrCat("error: -o ", out,
                     ": must be wide, json, yaml, name, jsonpath=TEMPLATE or "
                     "custom-columns=HEADER:PATH,..."));
  }
  return p;
}

std::string Cell(const Json& o, const std::vector<PathStep>& path) {
  std::vector<std::string> parts;
  for (const Json* v : Select(o, path)) parts.push_back(PrintValue(*v));
  return parts.empty() ? "<none>" : absl::StrJoin(parts, ",");
}

// Orders items by the value at `path`: numbers by value, then strings, objects missing it last;
// stable, so equal keys keep the server's order (by name).
void SortBy(std::vector<Json>& items, const std::string& expr) {
  absl::StatusOr<std::vector<PathStep>> path = ParsePath(expr);
  if (!path.ok()) Die(absl::StrCat("error: --sort-by: ", path.status().message()));
  auto key = [&](const Json& o) -> const Json* {
    std::vector<const Json*> v = Select(o, *path);
    return v.empty() ? nullptr : v.front();
  };
  std::stable_sort(items.begin(), items.end(), [&](const Json& a, const Json& b) {
    const Json* ka = key(a);
    const Json* kb = key(b);
    if (ka == nullptr || kb == nullptr) return ka != nullptr && kb == nullptr;
    if (ka->is_number() && kb->is_number()) return ka->get<double>() < kb->get<double>();
    if (ka->is_number() != kb->is_number()) return ka->is_number();
    return PrintValue(*ka) < PrintValue(*kb);
  });
}

// Prints `items` (a listing, or the objects of one watch event when `watching`: no header, and
// a single object rather than a List for json/yaml/jsonpath).
void Print(const ResourceInfo& r, const Printer& p, const GetFlags& f,
           const std::vector<Json>& items, bool single, bool watching) {
  using K = Printer::Kind;
  if (p.kind == K::kJson || p.kind == K::kYaml || p.kind == K::kJsonPath) {
    Json doc;
    if (single || watching) {
      doc = items.front();
    } else {
      doc = {
          {"apiVersion", "v1"}, {"kind", "List"}, {"metadata", Json::object()}, {"items", items}};
    }
    if (p.kind == K::kJson) std::cout << doc.dump(2) << "\n";
    if (p.kind == K::kYaml) std::cout << (watching ? "---\n" : "") << ToYaml(doc);
    if (p.kind == K::kJsonPath) std::cout << p.tmpl->Execute(doc) << (watching ? "\n" : "");
    std::cout.flush();
    return;
  }
  if (p.kind == K::kName) {
    for (const Json& o : items) {
      std::cout << absl::AsciiStrToLower(r.kind) << "/" << Meta(o, "name") << "\n";
    }
    std::cout.flush();
    return;
  }
  const bool show_ns = r.namespaced && f.all_namespaces;
  std::vector<std::vector<std::string>> rows;
  if (!watching && !f.no_headers) {
    if (p.kind == K::kCustomColumns) {
      rows.emplace_back();
      for (const auto& [header, path] : p.columns) rows.back().push_back(header);
    } else {
      rows.push_back(Header(r, p.kind == K::kWide));
    }
    if (show_ns) rows.back().insert(rows.back().begin(), "NAMESPACE");
  }
  RealClock clock;
  const absl::Time now = clock.Now();
  for (const Json& o : items) {
    if (p.kind == K::kCustomColumns) {
      rows.emplace_back();
      for (const auto& [header, path] : p.columns) rows.back().push_back(Cell(o, path));
    } else {
      rows.push_back(Row(r, o, p.kind == K::kWide, now));
    }
    if (show_ns) rows.back().insert(rows.back().begin(), Meta(o, "namespace"));
  }
  PrintTable(std::cout, rows);
  std::cout.flush();
}

// Prints a list the server printed; "No resources found" when it is empty.
void PrintPrinted(const ResourceInfo& r, const Printer& p, const GetFlags& f,
                  const PrintedList& list, const std::string& ns) {
  if (list.rows.empty()) {
    std::cerr << "No resources found"
              << (r.namespaced && !f.all_namespaces ? absl::StrCat(" in ", ns, " namespace") : "")
              << ".\n";
    return;
  }
  const bool show_ns = r.namespaced && f.all_namespaces;
  const std::vector<size_t> shown = Shown(list.columns, p.kind == Printer::Kind::kWide);
  std::vector<std::vector<std::string>> rows;
  rows.reserve(list.rows.size() + 1);
  if (!f.no_headers) {
    std::vector<std::string> names;
    for (const api::TableColumn& c : list.columns) names.push_back(c.name);
    rows.push_back(Pick(names, shown));
    if (show_ns) rows.back().insert(rows.back().begin(), "NAMESPACE");
  }
  for (const auto& [row_ns, cells] : list.rows) {
    rows.push_back(Pick(cells, shown));
    if (show_ns) rows.back().insert(rows.back().begin(), row_ns);
  }
  PrintTable(std::cout, rows);
  std::cout.flush();
}

// Follows changes after `revision` until interrupted or --request-timeout, printing each
// changed object (deletions too, as kubectl does). A watch the server ends (its own timeout)
// resumes from the last revision seen; an expired revision (410) is a clear error.
void Watch(ApiClient& client, const ResourceInfo& r, const Printer& p, const GetFlags& f,
           std::string revision) {
  const std::string& ns = client.config().ns;
  const absl::Time deadline = f.request_timeout > 0 ? absl::Now() + absl::Seconds(f.request_timeout)
                                                    : absl::InfiniteFuture();
  std::string field_selector = f.field_selector;
  if (f.names.size() == 1) {
    field_selector = absl::StrCat(field_selector.empty() ? "" : field_selector + ",",
                                  "metadata.name=", f.names.front());
  }
  while (absl::Now() < deadline) {
    std::string path =
        absl::StrCat(CollectionPath(r, ns, f.all_namespaces),
                     "?watch=true&allowWatchBookmarks=true&resourceVersion=", revision);
    absl::StrAppend(&path, SelectorQuery(f.selector, field_selector));
    std::string error;
    absl::StatusOr<int> code = client.Stream(
        path,
        [&](const std::string& line) {
          if (line.empty()) return true;  // keep-alive
          Json ev = Json::parse(line, nullptr, /*allow_exceptions=*/false);
          if (!ev.is_object() || !ev.contains("object")) return true;
          const Json& obj = ev["object"];
          if (ev.value("type", "") == "ERROR") {
            Die(absl::StrCat("error: watch ended: ", obj.value("message", line)));
          }
          if (obj.contains("metadata") && obj["metadata"].contains("resourceVersion")) {
            revision = obj["metadata"].value("resourceVersion", revision);
          }
          if (ev.value("type", "") == "BOOKMARK") return true;
          if (f.names.size() > 1 &&
              std::find(f.names.begin(), f.names.end(), Meta(obj, "name")) == f.names.end()) {
            return true;
          }
          Print(r, p, f, {obj}, true, true);
          return true;
        },
        deadline == absl::InfiniteFuture() ? absl::ZeroDuration() : deadline - absl::Now(), &error);
    if (!code.ok()) Die(absl::StrCat("error: ", code.status().message()));
    if (*code != 200) {
      Response res{*code, Json::parse(error, nullptr, /*allow_exceptions=*/false)};
      if (res.body.is_discarded()) res.body = error;
      Die(ErrorText(res));
    }
  }
}

void RunGet(const GetFlags& f) {
  const ResourceInfo* r = FindResource(f.resource);
  if (r == nullptr)
    Die(absl::StrCat("error: the server doesn't have a resource type \"", f.resource, "\""));
  const Printer printer = ParseOutput(f.output);
  ApiClient client = MakeClient(f.conn);
  const std::string& ns = client.config().ns;
  std::vector<Json> items;
  std::string revision;
  if (!f.names.empty()) {
    for (const std::string& name : f.names) {
      absl::StatusOr<Response> res = client.Do("GET", ItemPath(*r, ns, name));
      if (!res.ok()) Die(std::string(res.status().message()));
      if (res->code != 200) Die(ErrorText(*res));
      items.push_back(std::move(res->body));
    }
    if (f.watch) {
      // The store's revision now, after every object read: the watch starts there.
      absl::StatusOr<std::vector<Json>> l = ListAll(client, *r, ns, f.all_namespaces, "",
                                                    "metadata.name=" + f.names.front(), &revision);
      if (!l.ok()) Die(std::string(l.status().message()));
    }
  } else {
    // Tables the server prints unless the objects themselves are needed (--sort-by sorts them).
    if ((printer.kind == Printer::Kind::kTable || printer.kind == Printer::Kind::kWide) &&
        f.sort_by.empty()) {
      absl::StatusOr<std::optional<PrintedList>> printed =
          ListPrinted(client, *r, ns, f.all_namespaces, f.selector, f.field_selector, &revision);
      if (!printed.ok()) Die(std::string(printed.status().message()));
      if (printed->has_value()) {
        PrintPrinted(*r, printer, f, **printed, ns);
        if (f.watch) Watch(client, *r, printer, f, revision);
        return;
      }
    }
    absl::StatusOr<std::vector<Json>> l =
        ListAll(client, *r, ns, f.all_namespaces, f.selector, f.field_selector, &revision);
    if (!l.ok()) Die(std::string(l.status().message()));
    items = *std::move(l);
  }
  if (!f.sort_by.empty()) SortBy(items, f.sort_by);
  // Tables say when there is nothing; machine-readable outputs print what there is (nothing).
  const bool table = printer.kind == Printer::Kind::kTable ||
                     printer.kind == Printer::Kind::kWide ||
                     printer.kind == Printer::Kind::kCustomColumns;
  if (items.empty() && table) {
    std::cerr << "No resources found"
              << (r->namespaced && !f.all_namespaces ? absl::StrCat(" in ", ns, " namespace") : "")
              << ".\n";
  } else {
    Print(*r, printer, f, items, f.names.size() == 1, false);
  }
  if (f.watch) Watch(client, *r, printer, f, revision);
}

}  // namespace

void RegisterGetCommand(CLI::App& app) {
  auto f = std::make_shared<GetFlags>();
  CLI::App* cmd = app.add_subcommand("get", "List objects, or show some by name");
  cmd->add_option("resource", f->resource, "jobs|inferenceservices|nodes|queues|...")->required();
  cmd->add_option("names", f->names, "Names");
  cmd->add_option("-o,--output", f->output,
                  "wide|json|yaml|name|jsonpath=TEMPLATE|custom-columns=HEADER:PATH,...");
  cmd->add_option("-l,--selector", f->selector, "Label selector (k=v,k!=v,k in (a,b))");
  cmd->add_option("--field-selector", f->field_selector,
                  "Field selector (metadata.name=x,status.phase!=Running,spec.queue=q)");
  cmd->add_option("--sort-by", f->sort_by, "Sort by a JSONPath (.metadata.creationTimestamp)");
  cmd->add_flag("-A,--all-namespaces", f->all_namespaces, "List across every namespace");
  cmd->add_flag("--no-headers", f->no_headers, "Print tables without their header row");
  cmd->add_flag("-w,--watch", f->watch, "After listing, print each change as it happens");
  cmd->add_option("--request-timeout", f->request_timeout,
                  "Seconds after which a watch stops (default: until interrupted)");
  AddConnectionFlags(cmd, &f->conn);
  cmd->footer(
      "Examples:\n"
      "  tessera get jobs -A --sort-by=.metadata.creationTimestamp\n"
      "  tessera get jobs -o custom-columns=NAME:.metadata.name,PHASE:.status.phase\n"
      "  tessera get nodes -o jsonpath='{range .items[*]}{.metadata.name}{\"\\n\"}{end}'\n"
      "  tessera get jobs --field-selector status.phase=Running -w");
  cmd->callback([f] { RunGet(*f); });
}

}  // namespace tessera::cli
