// Request bodies read at the edge: at most a set number of bytes, whatever the transfer encoding,
// and only after the caller has authenticated the request from its headers.
//
// cpp-httplib 0.11 bounds a body only by its Content-Length: a chunked body (or one without a
// length) is appended to Request::body whole before any handler runs. ApiServer therefore takes
// every body-carrying request through httplib's ContentReader handler form, which runs the handler
// on the headers alone; ReadBoundedBody then counts the bytes as they arrive and stops reading at
// the limit, so memory held for a body never exceeds the limit (plus one 4 KiB read).
//
// A request refused before its body was read to the end leaves the rest of it on the connection,
// where httplib would parse it as the next request: RefuseAndClose answers and then ends the
// connection instead.
//
// Thread safety: stateless functions; each call is confined to its request's thread.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace tessera::server {

enum class BodyRead {
  kComplete,  // the whole body is in `out`
  kTooLarge,  // over the limit (declared or counted); reading stopped there
  kFailed,    // malformed framing, or the body stalled past the read timeout
};

// Reads the body of `req` through `reader` into `out`, stopping as soon as it would exceed `limit`
// bytes (a Content-Length over the limit is refused before a byte is read).
BodyRead ReadBoundedBody(const httplib::Request& req, const httplib::ContentReader& reader,
                         size_t limit, std::string& out);

// True when the request's framing announces a body (Content-Length above 0, or a
// Transfer-Encoding): bytes on the connection that the server has not read yet.
bool DeclaresBody(const httplib::Request& req);

// Answers `code` with a Kubernetes-style Status (`reason`, `message`), marked Connection: close,
// and makes httplib end the connection once the answer is written rather than read another
// request from it.
void RefuseAndClose(httplib::Response& res, int code, absl::string_view reason,
                    absl::string_view message);

}  // namespace tessera::server
