#include "server/request_metrics.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/kinds.h"

namespace tessera::server {

RequestLabels ClassifyRequest(absl::string_view method, absl::string_view path, bool watch) {
  absl::ConsumePrefix(&path, "/api/v1/");
  std::vector<absl::string_view> seg = absl::StrSplit(path, '/', absl::SkipEmpty());
  RequestLabels l{"other", "other"};
  if (seg.size() == 1 && seg[0] == "batch") {
    l.verb = method == "POST" ? "batch" : "other";
    return l;
  }
  absl::string_view plural;
  bool item = false;
  if (seg.size() >= 3 && seg.size() <= 4 && seg[0] == "namespaces") {
    plural = seg[2];
    item = seg.size() == 4;
  } else if (seg.size() >= 1 && seg.size() <= 2) {
    plural = seg[0];
    item = seg.size() == 2;
  }
  if (!plural.empty() && api::KindByPlural(std::string(plural)) != nullptr) {
    l.resource = std::string(plural);
  }
  if (method == "GET") {
    l.verb = item ? "get" : (watch ? "watch" : "list");
  } else if (method == "POST") {
    l.verb = "create";
  } else if (method == "PUT") {
    l.verb = "update";
  } else if (method == "PATCH") {
    l.verb = "patch";
  } else if (method == "DELETE") {
    l.verb = "delete";
  }
  return l;
}

ApiRequestMetrics::ApiRequestMetrics(metrics::Registry& r)
    : requests_(r.AddCounter("tessera_api_requests_total",
                             "API requests by verb, resource and HTTP status code.",
                             {"verb", "resource", "code"})),
      duration_(r.AddHistogram("tessera_api_request_duration_seconds",
                               "API request latency by verb and resource (a watch: until the "
                               "stream is set up).",
                               {"verb", "resource"}, metrics::ExponentialBuckets(1e-4, 2, 16))) {}

void ApiRequestMetrics::Observe(const RequestLabels& l, int code, double seconds) {
  requests_.With({l.verb, l.resource, absl::StrCat(code)}).Inc();
  duration_.With({l.verb, l.resource}).Observe(seconds);
}

}  // namespace tessera::server
