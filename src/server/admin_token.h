// The server's own admin token, for a server started without --tokens-file: authentication is
// on by default, so such a server keeps one admin token in its data dir and serves with it.
//
// The file (DATA_DIR/admin-token) holds the token on one line. It is created at first start with
// mode 0600 (never readable by another user, not even briefly: it is created with that mode) from
// 32 bytes of the kernel's randomness, and reused at every later start. A file that group or
// others may read is refused: the token would no longer be the owner's alone.
//
// Thread-compatible: call once at start.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::server {

// The file name within the data dir.
inline constexpr char kAdminTokenFile[] = "admin-token";

struct AdminToken {
  std::string path;      // where it is
  std::string token;     // the secret
  bool created = false;  // true at first start
};

// Reads DATA_DIR/admin-token, creating it first when missing. Errors name the file and what is
// wrong with it (unreadable, empty, readable by group or others, cannot be created).
absl::StatusOr<AdminToken> LoadOrCreateAdminToken(const std::string& data_dir);

// True when `host` (the HOST of --listen HOST:PORT) can only be reached from this machine:
// 127.0.0.0/8, ::1 (bracketed or not) or "localhost". An empty host, 0.0.0.0 or :: is every
// interface, so not loopback.
bool IsLoopbackHost(absl::string_view host);

}  // namespace tessera::server
