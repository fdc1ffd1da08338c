#include "server/request_body.h"

#include <memory>

#include "absl/strings/numbers.h"
#include "api/object_codec.h"

namespace tessera::server {

BodyRead ReadBoundedBody(const httplib::Request& req, const httplib::ContentReader& reader,
                         size_t limit, std::string& out) {
  out.clear();
  if (req.has_header("Content-Length")) {
    uint64_t declared = 0;
    if (!absl::SimpleAtoi(req.get_header_value("Content-Length"), &declared)) {
      return BodyRead::kFailed;
    }
    // httplib would read (and discard) a body over its payload limit to the end: refuse first.
    if (declared > limit + kDrainBytes) return BodyRead::kTooLarge;
  } else if (req.method == "DELETE") {
    // httplib reads no body of a DELETE without a Content-Length (a chunked one stays unread).
    return DeclaresBody(req) ? BodyRead::kFailed : BodyRead::kComplete;
  }
  bool over = false;
  size_t discarded = 0;
  const bool ok = reader([&](const char* data, size_t n) {
    if (!over && n <= limit - out.size()) {
      out.append(data, n);
      return true;
    }
    if (!over) {
      over = true;
      discarded = out.size();
      out.clear();
      out.shrink_to_fit();
    }
    discarded += n;
    // Past the drain allowance: stop; the rest stays on the wire (RefuseAndClose).
    return discarded <= limit + kDrainBytes;
  });
  if (over) return ok ? BodyRead::kTooLargeDrained : BodyRead::kTooLarge;
  return ok ? BodyRead::kComplete : BodyRead::kFailed;
}

bool DeclaresBody(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  if (!req.has_header("Content-Length")) return false;
  return req.get_header_value("Content-Length") != "0";
}

void RefuseAndClose(httplib::Response& res, int code, absl::string_view reason,
                    absl::string_view message) {
  auto body = std::make_shared<std::string>(api::StatusBody(code, reason, message).dump() + "\n");
  res.status = code;
  res.body.clear();
  res.set_header("Connection", "close");
  // A provider that writes the whole answer and then reports failure: httplib 0.11 has no other
  // way for a handler to end a kept-alive connection, and ends it when a provider fails.
  res.set_content_provider(body->size(), "application/json",
                           [body](size_t offset, size_t length, httplib::DataSink& sink) {
                             sink.write(body->data() + offset, length);
                             return false;
                           });
}

}  // namespace tessera::server
