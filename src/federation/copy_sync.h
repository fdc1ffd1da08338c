// CopySync: what the hub's copy of a job in a member cluster carries, and
// when a change made in the hub must be passed on to it.
//
// The copy is the hub object's namespace, name, labels, annotations and spec,
// plus the hub label (tessera.dev/federation-hub), the origin annotation (the
// hub object's uid) and the digest of all that (annotation
// tessera.dev/federation-spec). Each step the dispatcher compares the digest
// the copy should carry with the one it carries; when they differ it PUTs the
// copy (at the copy's listed resourceVersion; the member keeps the status). A
// digest, not the hub's resourceVersion, because the hub's own status writes
// (the mirror) bump that every time: one push per change of the spec or
// metadata, not per status write.
//
// A push the member refuses (a 4xx other than 409 Conflict / 404) is recorded
// in the hub's status.specSync {hash, state: Refused, message} and not tried
// again until the hub object changes again. A push the member accepts while
// the copy is bound is recorded as Deferred when it changes spec fields other
// than `suspend`: the member's controller applies those when the job is placed
// next, not in place (docs/control-plane.md). Otherwise Synced.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::federation {

using Json = nlohmann::json;

inline constexpr char kHubLabel[] = "tessera.dev/federation-hub";
inline constexpr char kOriginAnnotation[] = "tessera.dev/federation-origin";
inline constexpr char kSpecHashAnnotation[] = "tessera.dev/federation-spec";

// The member's copy of hub object `obj` (apiVersion, kind, metadata name,
// namespace, labels, annotations, and spec), with the hub label, the origin
// uid and the digest annotation.
Json CopyOf(const Json& obj, const std::string& hub, const std::string& uid);

// The copy's origin uid and digest annotations ("" when absent).
std::string OriginOf(const Json& copy);
std::string SpecHashOf(const Json& copy);

struct SyncPlan {
  bool push = false;          // PUT `want` to the member
  bool clear_record = false;  // status.specSync describes another version: erase it
};
// `want`: CopyOf the hub object now; `copy`: the member's copy as listed;
// `hub_status`: the hub object's status (its specSync).
SyncPlan PlanSync(const Json& want, const Json& copy, const Json& hub_status);

// What a push of `want` changes in `copy`: "metadata.labels",
// "metadata.annotations" (the digest aside) and "spec.<field>" per top-level
// spec field added, changed or removed, in that order.
std::vector<std::string> ChangedFields(const Json& copy, const Json& want);
// Of `changed`, the spec fields a bound copy applies only when placed again
// (every spec field but spec.suspend; metadata is not acted on).
std::vector<std::string> DeferredWhileBound(const std::vector<std::string>& changed);

}  // namespace tessera::federation
