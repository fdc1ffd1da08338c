#include "kube/api_error.h"

#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::kube {
namespace {

constexpr char kReasonUrl[] = "type.tessera.dev/kube.reason";
constexpr char kCodeUrl[] = "type.tessera.dev/kube.code";

absl::StatusCode CodeFor(int http, const std::string& reason) {
  switch (http) {
    case 400:
    case 415:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 405:
      return absl::StatusCode::kUnimplemented;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kFailedPrecondition;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 500:
      return absl::StatusCode::kInternal;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      break;
  }
  if (http >= 500) return absl::StatusCode::kUnavailable;
  return absl::StatusCode::kUnknown;
}

absl::Status Make(absl::string_view what, int http, const std::string& reason,
                  const std::string& message) {
  absl::Status s(CodeFor(http, reason),
                 absl::StrCat(what, ": ", reason.empty() ? absl::StrCat("HTTP ", http) : reason,
                              message.empty() ? "" : ": ", message));
  s.SetPayload(kReasonUrl, absl::Cord(reason));
  s.SetPayload(kCodeUrl, absl::Cord(absl::StrCat(http)));
  return s;
}

}  // namespace

absl::Status ApiErrorFromStatus(absl::string_view what, const nlohmann::json& st) {
  int code = 0;
  std::string reason, message;
  if (st.is_object()) {
    if (st.contains("code") && st["code"].is_number_integer()) code = st["code"].get<int>();
    if (st.contains("reason") && st["reason"].is_string()) reason = st["reason"].get<std::string>();
    if (st.contains("message") && st["message"].is_string()) {
      message = st["message"].get<std::string>();
    }
  }
  return Make(what, code, reason, message);
}

absl::Status ApiError(absl::string_view what, int http_code, const std::string& body) {
  nlohmann::json st = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (st.is_object() && st.value("kind", "") == "Status") {
    st["code"] = http_code;  // the HTTP code is the one that matters
    return ApiErrorFromStatus(what, st);
  }
  std::string text = body.substr(0, 200);
  if (!text.empty()) text = absl::StrCat("\"", text, body.size() > 200 ? "...\"" : "\"");
  return Make(what, http_code, "", text);
}

std::string ApiReason(const absl::Status& s) {
  auto c = s.GetPayload(kReasonUrl);
  return c ? std::string(*c) : "";
}

int ApiHttpCode(const absl::Status& s) {
  auto c = s.GetPayload(kCodeUrl);
  int code = 0;
  if (!c || !absl::SimpleAtoi(std::string(*c), &code)) return 0;
  return code;
}

bool IsApiNotFound(const absl::Status& s) { return ApiHttpCode(s) == 404; }
bool IsApiAlreadyExists(const absl::Status& s) {
  return ApiHttpCode(s) == 409 && ApiReason(s) == "AlreadyExists";
}
bool IsApiConflict(const absl::Status& s) {
  return ApiHttpCode(s) == 409 && ApiReason(s) != "AlreadyExists";
}
bool IsApiGone(const absl::Status& s) { return ApiHttpCode(s) == 410; }
bool IsApiTooManyRequests(const absl::Status& s) { return ApiHttpCode(s) == 429; }

}  // namespace tessera::kube
