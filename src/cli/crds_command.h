// `tessera crds [-o DIR]`: the Kubernetes CustomResourceDefinitions generated from the schema
// table (api/crd_gen.h) as YAML: one multi-document stream on stdout, or one file per CRD,
// <group>_<plural>.yaml, written into DIR (deploy/kubernetes/crds in this repository, where a test
// checks that they are current). Needs no server. Output is deterministic.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "api/crd_gen.h"

namespace tessera::cli {

// One CRD's file: its header as comments, then the CRD as block YAML.
std::string CrdFileText(const api::GeneratedCrd& crd);

// Every CRD's file text, as "---"-separated documents.
std::string AllCrdsText();

// Writes each CRD's file into `dir` (created if missing), replacing files of the same name and
// leaving others alone. Errors name the file.
absl::Status WriteCrdFiles(const std::string& dir);

void RegisterCrdsCommand(CLI::App& app);

}  // namespace tessera::cli
