// Bearer-token authentication and the authorization rules of the API.
//
// Tokens file: one principal per line, `TOKEN NAMESPACE ROLE [USER]`, separated by
// whitespace; blank lines and lines starting with '#' are ignored. USER names the person or
// service behind the token (a DNS-label-like name: letters, digits, '.', '_', '-', '@'); the
// server stamps it on what the token creates (metadata.annotations["tessera.dev/submitted-by"],
// squeue's USER). Without it: the namespace for a user, "admin" for an admin,
// "system:node:NAME" for a node.
//   ROLE admin          everything; NAMESPACE is ignored (write "*")
//   ROLE user           every verb on namespaced kinds in NAMESPACE only;
//                       read-only (get/list/watch) on cluster-scoped kinds
//   ROLE node:NAME      get/create/update of the Node object NAME (never its taints,
//                       cordon or pool, nor more capacity than it has); get (not list or
//                       watch) of the TrainingJobs and InferenceServices bound to it; its
//                       bindings at /api/v1/nodes/NAME/bindings. Status writes (members'
//                       reports, its Node's health) go through server/status_write.h.
// Unknown token or none: 401. Known token, action not allowed: 403.
// `tessera server` without --tokens-file serves with one admin token of its own (admin_token.h);
// no authentication at all (AllowAll) takes --insecure-no-auth and a loopback address.
//
// Immutable after loading; thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::server {

struct Principal {
  enum class Role { kAdmin, kUser, kNode };
  Role role = Role::kUser;
  std::string name_space;  // kUser: the tenant namespace
  std::string node;        // kNode: the node's name
  // Which token this is, for per-token shares and messages ("tokens file line 3"); never the
  // secret. Empty when authentication is off (every request is the same anonymous admin).
  std::string id;
  // Who submits with this token (the USER column, or its default); "admin" when
  // authentication is off.
  std::string user;
};

enum class Verb { kGet, kList, kWatch, kCreate, kUpdate, kDelete };

// What a request addresses: kind plural, namespace (empty for cluster-scoped
// kinds and for all-namespace lists) and name (empty for collections).
struct Resource {
  std::string plural;
  bool namespaced = true;
  std::string name_space;
  std::string name;
};

class Authenticator {
 public:
  // No tokens: authentication disabled, every request acts as admin. For tests and for
  // `tessera server --insecure-no-auth` (loopback only).
  static Authenticator AllowAll() { return Authenticator(); }
  // Parses a tokens file's text; errors name the line.
  static absl::StatusOr<Authenticator> Parse(absl::string_view text);
  static absl::StatusOr<Authenticator> LoadFile(const std::string& path);
  // One admin token and nothing else (the server's own, admin_token.h).
  static Authenticator SingleAdmin(const std::string& token);

  bool enabled() const { return enabled_; }
  // The principal for an `Authorization` header value, or nullopt (401).
  std::optional<Principal> Authenticate(absl::string_view authorization_header) const;

 private:
  bool enabled_ = false;
  std::map<std::string, Principal, std::less<>> tokens_;
};

// An empty string when allowed, else why not (for the 403 message).
std::string Authorize(const Principal& p, Verb verb, const Resource& r);

}  // namespace tessera::server
