// AdmissionWebhook: a validating admission webhook (admission.k8s.io/v1 AdmissionReview over
// HTTPS) that the operator serves so that the apiserver asks it before an operation the CRD
// schemas cannot judge: deleting a ModelVersion that InferenceServices still serve is refused
// with the message the standalone server gives (api::ServedDeletionMessage).
//
// Protocol: POST /validate with an AdmissionReview; the answer is an AdmissionReview whose
// response carries the request's uid, allowed, and for a refusal status {code 409, reason
// Conflict, message}; kubectl prints `admission webhook "..." denied the request: MESSAGE`.
// A body that is not an AdmissionReview gets 400.
// deploy/kubernetes/operator/ registers it (ValidatingWebhookConfiguration, DELETE of
// modelversions, failurePolicy Fail: while no operator answers, such deletes are refused rather
// than let through; the finalizer tessera.dev/served is the second guard).
// Thread safety: the judge is called on the server's connection threads, concurrently.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::http {
template <typename Base>
class Bounded;
}  // namespace tessera::http
namespace httplib {
class SSLServer;
}  // namespace httplib

namespace tessera::op {

struct WebhookOptions {
  std::string addr;                 // HOST:PORT (port 0: any free port)
  std::string cert_file, key_file;  // PEM; the certificate the apiserver verifies (caBundle)
};

// The AdmissionReview.request -> nullopt to allow, or the refusal's message.
using AdmissionJudge = std::function<std::optional<std::string>(const nlohmann::json& request)>;

// The AdmissionReview answering `review` (pure).
nlohmann::json AdmissionAnswer(const nlohmann::json& review,
                               const std::optional<std::string>& denial);

class AdmissionWebhook {
 public:
  // InvalidArgument naming the flag for a bad address or unreadable certificate/key;
  // Unavailable when the address cannot be listened on.
  static absl::StatusOr<std::unique_ptr<AdmissionWebhook>> Start(const WebhookOptions& opts,
                                                                 const AdmissionJudge& judge);
  ~AdmissionWebhook();
  AdmissionWebhook(const AdmissionWebhook&) = delete;
  AdmissionWebhook& operator=(const AdmissionWebhook&) = delete;

  int port() const { return port_; }
  void Stop();

 private:
  AdmissionWebhook() = default;
  std::unique_ptr<http::Bounded<httplib::SSLServer>> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace tessera::op
