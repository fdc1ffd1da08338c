// Internals shared by the ApiServer's translation units (api_server.cc: routing and the
// object verbs; api_server_wait.cc: watch streams and node-bindings long-polls). Not part of
// the server's interface.
#pragma once

#include <httplib.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "api/kinds.h"
#include "api/object_codec.h"
#include "api/selector.h"
#include "server/api_server.h"

namespace tessera::server {

// A parsed /api/v1 path.
struct ApiServer::Route {
  const api::KindInfo* kind = nullptr;
  std::string ns;    // empty: cluster-scoped kind, or all namespaces
  std::string name;  // empty: the collection
  Resource resource() const { return Resource{kind->plural, kind->namespaced, ns, name}; }
};

namespace internal {

// Answers `code` with `body` as JSON.
void Reply(httplib::Response& res, int code, const api::Json& body);
// Replies with the object just written, from its stored text (no second JSON encoding).
void ReplyStored(httplib::Response& res, int code, std::string_view stored, int64_t revision);
// Answers a Kubernetes-style Status with `reason`, `message` and field causes.
void Fail(httplib::Response& res, int code, absl::string_view reason, absl::string_view message,
          const std::vector<api::FieldError>& causes = {});
// The 413 message for a body over `limit` bytes, however it was encoded.
std::string BodyTooLargeMessage(uint64_t limit);
// Maps a store error onto the HTTP status a client acts on; `what` names the object.
void FailStore(httplib::Response& res, const absl::Status& s, const std::string& what);
// Parses an optional non-negative integer query parameter; on a bad value answers 400 and
// returns false.
bool QueryInt(const httplib::Request& req, const char* name, int64_t& out, httplib::Response& res);

// True when the job object's status.placement has a member on `node`.
bool BoundToNode(const api::Json& obj, const std::string& node);

// `kind "ns/name"` (or `kind "name"`) for messages.
std::string Describe(const api::KindInfo& kind, absl::string_view ns, absl::string_view name);

// A list's or watch's labelSelector and fieldSelector.
struct Selectors {
  api::Selector labels, fields;
  bool empty() const { return labels.empty() && fields.empty(); }
  bool Matches(const api::Json& obj) const { return labels.Matches(obj) && fields.Matches(obj); }
};
// Parses the request's selectors; on a bad one answers 400 and returns nullopt.
std::optional<Selectors> ParseSelectors(const httplib::Request& req, httplib::Response& res);

// The node-agent routes (a node's bindings, its heartbeat) are for that node's own token and for
// admins; user tokens get none. On refusal answers 403 naming `route` ("node bindings") or what a
// node may do (`own`: "read its own bindings") and returns false.
bool AllowNodeRoute(const Principal& p, const std::string& node, absl::string_view route,
                    absl::string_view own, httplib::Response& res);

// When the leader refreshes an unchanged `node`'s stored status: `interval` plus up to half of
// it, a fixed share per node name (ApiServerOptions::node_status_interval says why).
absl::Duration NodeStatusInterval(const std::string& node, absl::Duration interval);

}  // namespace internal
}  // namespace tessera::server
