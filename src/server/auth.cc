#include "server/auth.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tessera::server {

absl::StatusOr<Authenticator> Authenticator::Parse(absl::string_view text) {
  Authenticator a;
  a.enabled_ = true;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (parts.size() == 1) parts = absl::StrSplit(line, '\t', absl::SkipWhitespace());
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("tokens file line ", line_no, ": ", why));
    };
    if (parts.size() != 3 && parts.size() != 4) return bad("expected TOKEN NAMESPACE ROLE [USER]");
    Principal p;
    p.id = absl::StrCat("tokens file line ", line_no);
    std::string role(parts[2]);
    if (role == "admin") {
      p.role = Principal::Role::kAdmin;
    } else if (role == "user") {
      p.role = Principal::Role::kUser;
      p.name_space = std::string(parts[1]);
      if (p.name_space == "*") return bad("a user needs one namespace, not *");
    } else if (absl::StartsWith(role, "node:") && role.size() > 5) {
      p.role = Principal::Role::kNode;
      p.node = role.substr(5);
    } else {
      return bad(absl::StrCat("unknown role \"", role, "\" (admin, user, node:NAME)"));
    }
    if (parts.size() == 4) {
      p.user = std::string(parts[3]);
      const bool ok_chars = std::all_of(p.user.begin(), p.user.end(), [](char c) {
        return absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-' || c == '@';
      });
      if (!ok_chars || p.user.size() > 63) {
        return bad("USER must be at most 63 letters, digits, '.', '_', '-' or '@'");
      }
    } else if (p.role == Principal::Role::kUser) {
      p.user = p.name_space;
    } else if (p.role == Principal::Role::kNode) {
      p.user = absl::StrCat("system:node:", p.node);
    } else {
      p.user = "admin";
    }
    if (parts[0].size() < 8) return bad("token shorter than 8 characters");
    if (!a.tokens_.emplace(std::string(parts[0]), p).second) return bad("duplicate token");
  }
  return a;
}

absl::StatusOr<Authenticator> Authenticator::LoadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("tokens file ", path, ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<Authenticator> a = Parse(ss.str());
  if (!a.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", a.status().message()));
  }
  return a;
}

Authenticator Authenticator::SingleAdmin(const std::string& token) {
  Authenticator a;
  a.enabled_ = true;
  a.tokens_.emplace(token, Principal{Principal::Role::kAdmin, "", "", "the admin token", "admin"});
  return a;
}

std::optional<Principal> Authenticator::Authenticate(absl::string_view header) const {
  if (!enabled_) return Principal{Principal::Role::kAdmin, "", "", "", "admin"};
  if (!absl::ConsumePrefix(&header, "Bearer ")) return std::nullopt;
  header = absl::StripAsciiWhitespace(header);
  auto it = tokens_.find(header);
  if (it == tokens_.end()) return std::nullopt;
  return it->second;
}

std::string Authorize(const Principal& p, Verb verb, const Resource& r) {
  const bool read = verb == Verb::kGet || verb == Verb::kList || verb == Verb::kWatch;
  switch (p.role) {
    case Principal::Role::kAdmin:
      return "";
    case Principal::Role::kUser:
      if (!r.namespaced) {
        return read ? "" : absl::StrCat("users may not modify cluster-scoped ", r.plural);
      }
      if (r.name_space.empty()) return "users may only list their own namespace";
      if (r.name_space != p.name_space) {
        return absl::StrCat("namespace \"", r.name_space, "\" belongs to another tenant");
      }
      // A tenant reads its quotas; only an admin sets them (a tenant could otherwise lift its own).
      if (r.plural == "resourcequotas" && !read) return "only admins may change resource quotas";
      return "";
    case Principal::Role::kNode:
      // A node agent reads the jobs bound to it (ApiServer checks the binding) and reports its
      // members' states through the status subresource (status_write.h). Its bindings come
      // from GET /api/v1/nodes/NAME/bindings (its own only), never from a list or watch of
      // every job.
      if (r.plural == "trainingjobs" || r.plural == "inferenceservices") {
        if (verb == Verb::kGet) return "";
        return "nodes may only get the jobs bound to them and report their members at "
               ".../NAME/status; their bindings are at /api/v1/nodes/NAME/bindings";
      }
      if (r.plural != "nodes" || r.name != p.node) {
        return absl::StrCat("node \"", p.node, "\" may only access its own Node object");
      }
      if (verb == Verb::kDelete || verb == Verb::kList || verb == Verb::kWatch) {
        return "nodes may not delete, list or watch";
      }
      return "";
  }
  return "unknown role";
}

}  // namespace tessera::server
