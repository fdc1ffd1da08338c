// The API kinds served under /api/v1 and the one schema that defines each.
//
// Every object has the Kubernetes shape
//   {apiVersion: "tessera.dev/v1", kind, metadata, spec, status}
// where metadata and status share one definition across kinds and `spec`
// (and the allowed status phases) are per kind. The full-object schema built
// here is what request bodies are validated against; nothing else decides
// which fields exist.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "api/schema.h"

namespace tessera::api {

inline constexpr char kApiVersion[] = "tessera.dev/v1";
// Who created a TrainingJob or InferenceService: stamped by the API server from the caller's
// token (the USER column of its tokens file) on create, kept on update; never a client's.
inline constexpr char kSubmittedByAnnotation[] = "tessera.dev/submitted-by";

struct KindInfo {
  std::string kind;    // "TrainingJob"
  std::string plural;  // "trainingjobs", the URL segment
  bool namespaced = true;
  std::vector<std::string> phases;  // allowed status.phase values; the first is the default
  Schema object_schema;             // the whole object, metadata and status included
};

// All kinds, in a fixed order.
const std::vector<KindInfo>& AllKinds();
// The kind whose plural is `plural`, or null.
const KindInfo* KindByPlural(std::string_view plural);

// TrainingJob or InferenceService: the kinds that are scheduled as gangs of members.
bool IsJobKind(const KindInfo& kind);

// The GPUs a Node's spec declares: len(gpus) where listed, else gpuCount, else 0.
int64_t NodeGpuCount(const nlohmann::json& spec);

}  // namespace tessera::api
