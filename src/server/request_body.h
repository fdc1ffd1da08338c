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
// connection instead. A body over the limit is first read on and discarded, up to kDrainBytes
// more (memory stays bounded: nothing is kept), so that a client that writes its whole body before
// reading the answer gets the 413 instead of a reset connection; only a body larger still is cut.
//
// Thread safety: stateless functions; each call is confined to its request's thread.
#pragma once

#include <httplib.h>

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace tessera::server {

// How much of a body over the limit is read and discarded before the connection is cut.
inline constexpr size_t kDrainBytes = size_t{4} << 20;

enum class BodyRead {
  kComplete,         // the whole body is in `out`
  kTooLargeDrained,  // over the limit; the rest was read and discarded: the connection is clean
  kTooLarge,         // over the limit, and over kDrainBytes more (or it stalled): rest unread
  kFailed,           // malformed framing, or the body stalled past the read timeout
};

// Reads the body of `req` through `reader` into `out`, keeping at most `limit` bytes: past them it
// discards up to kDrainBytes more and stops (a Content-Length over limit + kDrainBytes is refused
// before a byte is read).
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
