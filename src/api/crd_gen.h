// Kubernetes CustomResourceDefinitions (apiextensions.k8s.io/v1) generated from the schema table
// that validates the standalone server's API (kinds.h), so that one object means the same, and
// is refused for the same reasons, in both modes. `tessera crds` (cli/crds_command.h) writes them;
// deploy/kubernetes/crds/ holds them, checked current by a test.
//
// Algorithm: for each CRD kind, the kind's spec schema is walked into a structural OpenAPI v3
// schema: string/integer/number/boolean, objects with `properties` and `required`, arrays with
// `items`, string-keyed maps as `additionalProperties`; limits as minimum / maximum (a "> 0" as
// `minimum: 0, exclusiveMinimum: true`), maxLength, enum, minItems / maxItems / maxProperties; a
// DNS label as maxLength 63 plus its pattern. What OpenAPI cannot say becomes a CEL rule
// (x-kubernetes-validations): a map's allowed keys, metadata.name as a DNS label (the apiserver
// itself allows dots), and the cross-field checks of api/object_codec.cc and api/elastic_spec.cc,
// written a second time in CEL (tests/kube/kube_crd_test.cc holds both to the same answers).
// What neither can check is listed in each file's header comment, with who checks it instead.
// The status is the controllers' and is kept whole (x-kubernetes-preserve-unknown-fields).
//
// Pure and deterministic: the same table gives the same JSON (object keys sorted, lists in
// declaration order). Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "api/kinds.h"
#include "api/schema.h"
#include "nlohmann/json.hpp"

namespace tessera::api {

inline constexpr char kCrdGroup[] = "tessera.dev";
// What the pattern of a DNS label field is, and what metadata.name's CEL rule matches.
inline constexpr char kDnsLabelPattern[] = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

// The implicit noexcept moves call nlohmann::json's move, which only asserts; clang-tidy cannot
// see that it never throws.
// NOLINTNEXTLINE(bugprone-exception-escape)
struct GeneratedCrd {
  std::string kind;                 // "TrainingJob"
  std::string file_name;            // "tessera.dev_trainingjobs.yaml": <group>_<plural>.yaml
  std::vector<std::string> header;  // the file's comment lines, without "# "
  nlohmann::json crd;               // the CustomResourceDefinition
};

// The kinds served as CRDs, in this order: TrainingJob, InferenceService, GPUPool, Checkpoint,
// ModelVersion, Queue.
const std::vector<std::string>& CrdKinds();

// One CRD per kind of CrdKinds(), in that order.
std::vector<GeneratedCrd> GenerateCrds();

// The structural OpenAPI v3 schema of a value that `s` validates, with the CEL rules that `s`
// itself implies (a map's keys); no cross-field rules.
nlohmann::json OpenApiSchema(const Schema& s);

}  // namespace tessera::api
