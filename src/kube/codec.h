// Codecs between the typed objects of objects.h and the API's JSON.
//
// Decode* accepts what the apiserver sends (absent fields take their API defaults) and returns
// InvalidArgument naming the object and every bad field at once ("Pod team-a/p0:
// spec.containers[0].resources.requests.cpu: quantity \"x\": no digits; metadata.labels.a: must be
// a string"). Encode* overlays the typed fields on the object's `raw` JSON (see objects.h) and sets
// apiVersion and kind. All functions are pure and thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kube/objects.h"

namespace tessera::kube {

absl::StatusOr<ObjectMeta> DecodeObjectMeta(const Json& metadata);
// Writes `m` into `metadata` (an object, normally the one it was decoded from).
void EncodeObjectMeta(const ObjectMeta& m, Json& metadata);

absl::StatusOr<Pod> DecodePod(const Json& j);
Json EncodePod(const Pod& p);
absl::StatusOr<Node> DecodeNode(const Json& j);
Json EncodeNode(const Node& n);
absl::StatusOr<PriorityClass> DecodePriorityClass(const Json& j);
Json EncodePriorityClass(const PriorityClass& pc);
absl::StatusOr<Lease> DecodeLease(const Json& j);
Json EncodeLease(const Lease& l);
absl::StatusOr<Event> DecodeEvent(const Json& j);
Json EncodeEvent(const Event& e);
absl::StatusOr<PodDisruptionBudget> DecodePodDisruptionBudget(const Json& j);
Json EncodePodDisruptionBudget(const PodDisruptionBudget& pdb);

// The bodies of POST .../pods/NAME/binding and .../pods/NAME/eviction.
Json EncodeBinding(const Binding& b);
Json EncodeEviction(const Eviction& e);

// metav1.MicroTime as the API writes it: "2026-01-02T15:04:05.123456Z".
std::string FormatMicroTime(absl::Time t);
// RFC 3339 with or without fractional seconds (metav1.Time and MicroTime).
absl::StatusOr<absl::Time> ParseApiTime(const std::string& s);

}  // namespace tessera::kube
