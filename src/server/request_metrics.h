// ApiRequestMetrics: API request rate and latency by verb, resource and code,
// Kubernetes' apiserver_request_* shape:
//   tessera_api_requests_total{verb, resource, code}
//   tessera_api_request_duration_seconds{verb, resource} (histogram)
// verb is get | list | watch | create | update | patch | delete | batch |
// other; resource is a known plural (trainingjobs, nodes, ...) or "other", so
// a client probing random paths cannot create unbounded series. A watch's
// duration is the time to set the stream up, not its life.
// Thread safety: Observe from any request thread.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "metrics/registry.h"

namespace tessera::server {

struct RequestLabels {
  std::string verb;
  std::string resource;
};

// Classifies an /api/v1 request the way the router does (see api_server.cc).
RequestLabels ClassifyRequest(absl::string_view method, absl::string_view path, bool watch);

class ApiRequestMetrics {
 public:
  explicit ApiRequestMetrics(metrics::Registry& r);
  void Observe(const RequestLabels& l, int code, double seconds);

 private:
  metrics::Family<metrics::Counter>& requests_;
  metrics::Family<metrics::Histogram>& duration_;
};

}  // namespace tessera::server
