#include "server/dashboard.h"

#include <httplib.h>

#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "api/object_codec.h"
#include "server/fleet.h"
#include "server/slot_shares.h"
#include "server/ui_assets.h"

namespace tessera::server {
namespace {

void Fail(httplib::Response& res, int code, absl::string_view reason, absl::string_view message) {
  res.status = code;
  res.set_content(api::StatusBody(code, reason, message).dump() + "\n", "application/json");
}

void ServeAsset(absl::string_view name, httplib::Response& res) {
  const UiAsset* a = FindUiAsset(std::string_view(name.data(), name.size()));
  if (a == nullptr) return Fail(res, 404, "NotFound", absl::StrCat("no dashboard file ", name));
  res.set_content(std::string(a->body), std::string(a->content_type));
  // The page's files change with the binary only.
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Content-Type-Options", "nosniff");
}

}  // namespace

void RegisterDashboardRoutes(httplib::Server& http, store::Store& store, Authenticator auth,
                             const GpuSamples* samples, absl::Duration metrics_freshness,
                             int max_waits, int max_waits_per_token) {
  http.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/ui/"); });
  http.Get("/ui",
           [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/ui/"); });
  http.Get("/ui/",
           [](const httplib::Request&, httplib::Response& res) { ServeAsset("index.html", res); });
  http.Get(R"(/ui/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    ServeAsset(req.matches[1].str(), res);
  });
  auto shared_auth = std::make_shared<const Authenticator>(std::move(auth));
  auto waits = std::make_shared<SlotShares>("dashboard long-polls", max_waits, max_waits_per_token);
  http.Get("/api/v1/fleet", [&store, samples, shared_auth, metrics_freshness, waits](
                                const httplib::Request& req, httplib::Response& res) {
    std::optional<Principal> who = shared_auth->Authenticate(req.get_header_value("Authorization"));
    if (!who) {
      res.set_header("WWW-Authenticate", "Bearer");
      return Fail(res, 401, "Unauthorized", "a valid bearer token is required");
    }
    FleetRequest fr;
    fr.now = absl::Now();
    fr.metrics_freshness = metrics_freshness;
    if (std::string v = req.get_param_value("resourceVersion"); !v.empty()) {
      if (!absl::SimpleAtoi(v, &fr.since) || fr.since < 0) {
        return Fail(res, 400, "BadRequest", "resourceVersion: must be a non-negative integer");
      }
    }
    if (std::string v = req.get_param_value("waitSeconds"); !v.empty()) {
      if (!absl::SimpleAtod(v, &fr.wait_seconds) || !(fr.wait_seconds >= 0)) {
        return Fail(res, 400, "BadRequest", "waitSeconds: must be a non-negative number");
      }
    }
    if (std::string v = req.get_param_value("samplesVersion"); !v.empty()) {
      if (!absl::SimpleAtoi(v, &fr.samples_since) || fr.samples_since < 0) {
        return Fail(res, 400, "BadRequest", "samplesVersion: must be a non-negative integer");
      }
    }
    std::shared_ptr<SlotShares::Slot> slot;  // held while this request waits
    if (fr.wait_seconds > 0) {
      std::string why;
      slot = waits->Acquire(who->id, &why);
      if (slot == nullptr) {
        res.set_header("Retry-After", "1");
        return Fail(res, 429, "TooManyRequests", why);
      }
    }
    absl::StatusOr<std::string> body = FleetSummary(store, samples, *who, fr);
    if (!body.ok()) {
      switch (body.status().code()) {
        case absl::StatusCode::kPermissionDenied:
          return Fail(res, 403, "Forbidden", body.status().message());
        case absl::StatusCode::kInvalidArgument:
          return Fail(res, 400, "BadRequest", body.status().message());
        default:
          return Fail(res, 500, "InternalError", body.status().message());
      }
    }
    res.set_header("Cache-Control", "no-store");
    // Not plain "application/json": for that type this cpp-httplib (0.11) brotli-compresses
    // the body for any browser at brotli's slowest quality, ~6 s for the 1.7 MB summary of
    // 100,000 GPUs on the development VM; uncompressed it is sent in milliseconds.
    res.set_content(*std::move(body), "application/json; charset=utf-8");
  });
}

}  // namespace tessera::server
