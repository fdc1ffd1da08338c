#include "operator/admission_webhook.h"

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "http/bounded_server.h"

namespace tessera::op {

nlohmann::json AdmissionAnswer(const nlohmann::json& review,
                               const std::optional<std::string>& denial) {
  nlohmann::json response = {
      {"uid", review.value("request", nlohmann::json::object()).value("uid", "")},
      {"allowed", !denial.has_value()}};
  if (denial) {
    response["status"] = {{"code", 409}, {"reason", "Conflict"}, {"message", *denial}};
  }
  return {{"apiVersion", review.value("apiVersion", "admission.k8s.io/v1")},
          {"kind", "AdmissionReview"},
          {"response", std::move(response)}};
}

absl::StatusOr<std::unique_ptr<AdmissionWebhook>> AdmissionWebhook::Start(
    const WebhookOptions& opts, const AdmissionJudge& judge) {
  std::string host = opts.addr, port_text;
  if (auto colon = opts.addr.rfind(':'); colon != std::string::npos) {
    host = opts.addr.substr(0, colon);
    port_text = opts.addr.substr(colon + 1);
  }
  int port = -1;
  if (host.empty() || !absl::SimpleAtoi(port_text, &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--webhook-addr: expected HOST:PORT, got '", opts.addr, "'"));
  }
  for (const auto& [flag, file] :
       {std::pair{"--webhook-cert", opts.cert_file}, std::pair{"--webhook-key", opts.key_file}}) {
    if (file.empty() || !std::ifstream(file).good()) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read '", file, "'"));
    }
  }
  std::unique_ptr<AdmissionWebhook> w(new AdmissionWebhook());
  w->server_ = std::make_unique<http::BoundedSslServer>(
      http::ConnectionLimits{}, opts.cert_file.c_str(), opts.key_file.c_str());
  if (!w->server_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("--webhook-cert/--webhook-key: ", opts.cert_file,
                                                   " and ", opts.key_file,
                                                   " are not a PEM certificate and its key"));
  }
  w->server_->Post("/validate", [judge](const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json review = nlohmann::json::parse(req.body, nullptr, false);
    if (!review.is_object() || !review.contains("request") || !review["request"].is_object()) {
      res.status = 400;
      res.set_content("expected an admission.k8s.io/v1 AdmissionReview", "text/plain");
      return;
    }
    res.set_content(AdmissionAnswer(review, judge(review["request"])).dump(), "application/json");
  });
  w->port_ = port == 0 ? w->server_->bind_to_any_port(host)
                       : (w->server_->bind_to_port(host, port) ? port : -1);
  if (w->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("--webhook-addr ", opts.addr, ": cannot listen"));
  }
  w->thread_ = std::thread([s = w->server_.get()] { s->listen_after_bind(); });
  return w;
}

void AdmissionWebhook::Stop() {
  if (!server_) return;
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

AdmissionWebhook::~AdmissionWebhook() { Stop(); }

}  // namespace tessera::op
