// RestClient: a Kubernetes REST client over HTTP/1.1 with TLS and keep-alive (cpp-httplib,
// OpenSSL), for JSON objects.
//
// Verbs: Get, List (every page), Create, Update (PUT), MergePatch (application/merge-patch+json),
// Delete, Post to a subresource (pods/NAME/binding, pods/NAME/eviction; Bind and Evict wrap
// them) and Watch (a stream of events from a resourceVersion, bookmarks on request). Errors are
// api_error.h's: the verb and object, the API's Status reason and message; a transport failure is
// Unavailable and a TLS verification failure names the certificate authority to check.
//
// Thread safety: every method may be called from any thread at once. Requests share a pool of
// keep-alive connections (one per request in flight, up to `max_idle_connections` kept idle); a
// watch has a connection of its own. An optional client-side token bucket (qps/burst) paces
// requests, as client-go's rest.Config QPS/Burst do; watches are not paced.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "kube/kubeconfig.h"
#include "kube/objects.h"
#include "kube/resource.h"

namespace httplib {
class ClientImpl;
}  // namespace httplib

namespace tessera::kube {

class TokenBucket;

struct RestOptions {
  absl::Duration timeout = absl::Seconds(30);  // per request, watches excepted
  absl::Duration connect_timeout = absl::Seconds(5);
  int max_idle_connections = 16;
  double qps = 0;  // 0: not paced
  int burst = 1;
  std::string user_agent = "tessera";
  // Paces the token bucket and Retry-After waits. Null: a RealClock owned by the client.
  Clock* clock = nullptr;
};

struct ListOptions {
  std::string label_selector, field_selector;
  std::string resource_version;        // "" most recent (quorum read); "0" any (cache)
  std::string resource_version_match;  // "", "NotOlderThan" or "Exact"
  int64_t limit = 0;                   // List: page size (0: one page); Watch: ignored
  // Watch only.
  bool allow_watch_bookmarks = false;
  // Streams the current state as ADDED events first, then a BOOKMARK annotated
  // "k8s.io/initial-events-end" (WatchList; needs resource_version_match NotOlderThan).
  bool send_initial_events = false;
  std::optional<int64_t> timeout_seconds;  // the server ends the watch after this long
};

struct DeleteOptions {
  std::optional<int64_t> grace_period_seconds;
  std::string uid_precondition, resource_version_precondition;
  std::string propagation_policy;  // "", Orphan, Background, Foreground
};

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's move only asserts.
struct WatchEvent {
  std::string type;  // ADDED, MODIFIED, DELETED, BOOKMARK
  Json object;
};

// Stops a Watch in progress from another thread. Thread-safe; one per watch at a time; a
// cancelled token stays cancelled (a Watch started with it returns Cancelled at once).
class WatchCancel {
 public:
  void Cancel();
  bool cancelled() const;

 private:
  friend class RestClient;
  // False when already cancelled.
  bool Register(httplib::ClientImpl* http);
  void Unregister();
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  httplib::ClientImpl* active_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// NOLINTNEXTLINE(bugprone-exception-escape)
struct HttpResult {
  int status = 0;
  std::string body;
};

class RestClient {
 public:
  // InvalidArgument when the server URL, CA or client certificate cannot be used (named).
  static absl::StatusOr<std::unique_ptr<RestClient>> Create(KubeConfig config,
                                                            RestOptions options = {});
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  absl::StatusOr<Json> Get(const ResourceType& t, const std::string& ns, const std::string& name,
                           const std::string& subresource = "");
  // Every page (opts.limit per page), as one list: {"metadata": {"resourceVersion"}, "items"}.
  absl::StatusOr<Json> List(const ResourceType& t, const std::string& ns,
                            const ListOptions& opts = {});
  absl::StatusOr<Json> Create(const ResourceType& t, const std::string& ns, const Json& obj);
  absl::StatusOr<Json> Update(const ResourceType& t, const std::string& ns, const std::string& name,
                              const Json& obj, const std::string& subresource = "");
  // RFC 7386 JSON merge patch (null deletes a key).
  absl::StatusOr<Json> MergePatch(const ResourceType& t, const std::string& ns,
                                  const std::string& name, const Json& patch,
                                  const std::string& subresource = "");
  absl::Status Delete(const ResourceType& t, const std::string& ns, const std::string& name,
                      const DeleteOptions& opts = {});
  // POST to NAME/SUBRESOURCE (binding, eviction, ...).
  absl::StatusOr<Json> PostSubresource(const ResourceType& t, const std::string& ns,
                                       const std::string& name, const std::string& subresource,
                                       const Json& body);
  absl::Status Bind(const Binding& b);
  // ResourceExhausted (IsTooManyRequests) when a PodDisruptionBudget refuses the eviction: returned
  // at once, never waited out as a load-shedding 429 is.
  absl::Status Evict(const Eviction& e);

  // Streams events of `t` from opts.resource_version to `on_event` until the server ends the
  // stream (OK; resume from the last event's resourceVersion), on_event returns false (OK),
  // `cancel` fires (Cancelled), or an error: IsGone when the resourceVersion is too old (relist),
  // Unavailable when the connection is lost. Runs on the caller's thread.
  absl::Status Watch(const ResourceType& t, const std::string& ns, const ListOptions& opts,
                     const std::function<bool(WatchEvent&&)>& on_event,
                     WatchCancel* cancel = nullptr);

  // Any request (path with query), e.g. GET /readyz or /version; transport errors only.
  absl::StatusOr<HttpResult> Raw(const std::string& method, const std::string& path,
                                 const std::string& body = "",
                                 const std::string& content_type = "application/json");

  const KubeConfig& config() const { return config_; }

 private:
  struct Tls;
  RestClient(KubeConfig config, RestOptions options);
  std::unique_ptr<httplib::ClientImpl> NewConnection(absl::Duration read_timeout) const;
  std::unique_ptr<httplib::ClientImpl> Acquire();
  void Release(std::unique_ptr<httplib::ClientImpl> c);
  std::string BearerToken();
  absl::Status TransportError(const httplib::ClientImpl& http, int error) const;
  // What a 429 answer means for the request: the API shedding load (wait as Retry-After says,
  // a few times) or the request's own refusal, which the caller acts on (an eviction that a
  // PodDisruptionBudget forbids).
  enum class On429 : uint8_t { kRetryAfter, kReturn };
  // One request through the pool; `what` names it in errors. HTTP errors become ApiError.
  absl::StatusOr<Json> Call(const std::string& what, const std::string& method,
                            const std::string& path, const std::string& body,
                            const std::string& content_type, On429 on_429 = On429::kRetryAfter);
  absl::StatusOr<HttpResult> Send(const std::string& method, const std::string& path,
                                  const std::string& body, const std::string& content_type,
                                  On429 on_429 = On429::kRetryAfter);

  const KubeConfig config_;
  const RestOptions options_;
  std::string scheme_host_;
  std::string host_;
  int port_ = 0;
  bool https_ = false;
  std::unique_ptr<Tls> tls_;
  std::unique_ptr<Clock> owned_clock_;
  Clock* clock_ = nullptr;
  std::unique_ptr<TokenBucket> bucket_;

  absl::Mutex pool_mu_;
  std::vector<std::unique_ptr<httplib::ClientImpl>> idle_ ABSL_GUARDED_BY(pool_mu_);

  absl::Mutex token_mu_;
  std::string file_token_ ABSL_GUARDED_BY(token_mu_);
  int64_t token_mtime_ns_ ABSL_GUARDED_BY(token_mu_) = -1;
};

// "a=b,c in (d)" -> "a%3Db%2Cc%20in%20%28d%29": a query parameter's value.
std::string UrlEncode(absl::string_view s);
// "?labelSelector=...&resourceVersion=..." for `opts` (watch adds watch=1), or "".
std::string ListQuery(const ListOptions& opts, bool watch);

}  // namespace tessera::kube
