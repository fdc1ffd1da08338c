#include "cli/crds_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "cli/yaml_json.h"

namespace tessera::cli {

std::string CrdFileText(const api::GeneratedCrd& crd) {
  std::string out;
  for (const std::string& line : crd.header)
    absl::StrAppend(&out, line.empty() ? "#" : "# ", line, "\n");
  absl::StrAppend(&out, ToYaml(crd.crd));
  return out;
}

std::string AllCrdsText() {
  std::string out;
  for (const api::GeneratedCrd& crd : api::GenerateCrds()) {
    absl::StrAppend(&out, out.empty() ? "" : "---\n", CrdFileText(crd));
  }
  return out;
}

absl::Status WriteCrdFiles(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  for (const api::GeneratedCrd& crd : api::GenerateCrds()) {
    const std::filesystem::path path = std::filesystem::path(dir) / crd.file_name;
    // Written beside the target and renamed over it: a reader never sees half a file.
    const std::filesystem::path tmp = path.string() + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      f << CrdFileText(crd);
      f.close();
      if (!f) return absl::InternalError(absl::StrCat(tmp.string(), ": cannot write"));
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) return absl::InternalError(absl::StrCat(path.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

void RegisterCrdsCommand(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "crds", "Print the Kubernetes CRDs of Tessera's kinds, generated from the API's schemas");
  cmd->add_option("-o,--output-dir", *dir,
                  "Write one file per CRD (<group>_<plural>.yaml) into DIR instead of stdout");
  cmd->footer(
      "Examples:\n"
      "  tessera crds | kubectl apply -f -\n"
      "  tessera crds -o deploy/kubernetes/crds");
  cmd->callback([dir] {
    if (dir->empty()) {
      std::cout << AllCrdsText();
      return;
    }
    if (absl::Status s = WriteCrdFiles(*dir); !s.ok()) {
      std::cerr << "tessera crds: " << s.message() << "\n";
      throw CLI::RuntimeError(1);
    }
  });
}

}  // namespace tessera::cli
