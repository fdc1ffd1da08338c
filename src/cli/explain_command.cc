// `tessera explain RESOURCE[.FIELD...] [--recursive]`: the fields of a kind, from the same
// schema table the server validates with (api/kinds.cc), so what it prints is what the server
// accepts: each field's type, whether it is required and its limits. Works offline: it needs
// no server.
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "api/kinds.h"
#include "cli/cli_internal.h"
#include "common/suggest.h"

namespace tessera::cli {
namespace {

struct ExplainFlags {
  std::string target;
  bool recursive = false;
};

// The schema whose fields a path's last step lists: an array's or map's element.
const api::Schema* Inner(const api::Schema* s) {
  while (s != nullptr && s->element() != nullptr) s = s->element();
  return s;
}

void PrintFields(const api::Schema& s, int indent, bool recursive) {
  const api::Schema* inner = Inner(&s);
  if (inner == nullptr || inner->type() != api::Schema::Type::kObject) return;
  size_t width = 0;
  for (const api::Schema::Field& f : inner->fields()) width = std::max(width, f.name.size());
  const std::string pad(static_cast<size_t>(indent), ' ');
  for (const api::Schema::Field& f : inner->fields()) {
    std::cout << pad << f.name << std::string(width - f.name.size() + 2, ' ') << "<"
              << f.schema.TypeName() << ">" << (f.required ? " -required-" : "") << "\n";
    const std::string c = f.schema.Constraints();
    if (!c.empty() && !recursive) std::cout << pad << "    " << c << "\n";
    if (recursive) PrintFields(f.schema, indent + 2, true);
  }
}

void RunExplain(const ExplainFlags& f) {
  std::vector<std::string> steps = absl::StrSplit(f.target, '.');
  const ResourceInfo* r = FindResource(steps.front());
  const api::KindInfo* kind = r != nullptr ? api::KindByPlural(r->plural) : nullptr;
  if (kind == nullptr) {
    std::vector<std::string> names;
    for (const ResourceInfo& info : AllResources()) names.push_back(info.plural);
    Die(absl::StrCat("error: the server doesn't have a resource type \"", steps.front(), "\"",
                     DidYouMean(steps.front(), names)));
  }
  const api::Schema* s = &kind->object_schema;
  bool required = false;
  std::string path;
  for (size_t i = 1; i < steps.size(); ++i) {
    const api::Schema* inner = Inner(s);
    const api::Schema::Field* field = nullptr;
    std::vector<std::string> names;
    if (inner != nullptr && inner->type() == api::Schema::Type::kObject) {
      for (const api::Schema::Field& fl : inner->fields()) {
        names.push_back(fl.name);
        if (fl.name == steps[i]) field = &fl;
      }
    }
    if (field == nullptr) {
      Die(absl::StrCat("error: field \"", steps[i], "\" does not exist in ", kind->kind,
                       path.empty() ? "" : "." + path, DidYouMean(steps[i], names)));
    }
    path = path.empty() ? steps[i] : absl::StrCat(path, ".", steps[i]);
    s = &field->schema;
    required = field->required;
  }
  std::cout << "KIND:     " << kind->kind << "\n"
            << "VERSION:  " << api::kApiVersion << "\n"
            << "SCOPE:    " << (kind->namespaced ? "Namespaced" : "Cluster") << "\n\n";
  if (!path.empty()) {
    std::cout << "FIELD:    " << path << " <" << s->TypeName() << ">"
              << (required ? " -required-" : "") << "\n";
    if (std::string c = s->Constraints(); !c.empty()) std::cout << "          " << c << "\n";
    std::cout << "\n";
  } else if (!kind->phases.empty()) {
    std::cout << "PHASES:   ";
    for (size_t i = 0; i < kind->phases.size(); ++i) {
      std::cout << (i ? ", " : "") << kind->phases[i];
    }
    std::cout << "\n\n";
  }
  const api::Schema* inner = Inner(s);
  if (inner != nullptr && inner->type() == api::Schema::Type::kObject && !inner->fields().empty()) {
    std::cout << "FIELDS:\n";
    PrintFields(*s, 2, f.recursive);
  }
}

}  // namespace

void RegisterExplainCommand(CLI::App& app) {
  auto f = std::make_shared<ExplainFlags>();
  CLI::App* cmd = app.add_subcommand(
      "explain", "Show a kind's fields, types and limits (the schema the server validates with)");
  cmd->add_option("target", f->target, "RESOURCE or RESOURCE.FIELD.PATH")->required();
  cmd->add_flag("--recursive", f->recursive, "Show every nested field as a tree");
  cmd->footer(
      "Examples:\n"
      "  tessera explain trainingjob\n"
      "  tessera explain trainingjob.spec.groups\n"
      "  tessera explain node.spec --recursive");
  cmd->callback([f] { RunExplain(*f); });
}

}  // namespace tessera::cli
