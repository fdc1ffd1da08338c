// The API resources the CLI knows, their aliases (kubectl habits: `jobs`,
// `isvc`, `no`, ...) and their URL paths.
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace tessera::cli {

struct ResourceInfo {
  std::string plural;  // URL segment: "trainingjobs"
  std::string kind;    // "TrainingJob"
  bool namespaced = true;
  std::vector<std::string> aliases;
};

const std::vector<ResourceInfo>& AllResources();
// By plural, alias or kind (case-insensitive); null when unknown.
const ResourceInfo* FindResource(const std::string& name);
const ResourceInfo* ResourceForKind(const std::string& kind);

// "/api/v1/namespaces/NS/PLURAL", "/api/v1/PLURAL" (cluster-scoped, or all
// namespaces when `all_namespaces`).
std::string CollectionPath(const ResourceInfo& r, const std::string& ns, bool all_namespaces);
std::string ItemPath(const ResourceInfo& r, const std::string& ns, const std::string& name);
// ItemPath of an object as the API returns it (kind, metadata.namespace, metadata.name); empty
// for an unknown kind.
std::string ObjectPath(const nlohmann::json& obj);
// Percent-encodes a query parameter value.
std::string QueryEscape(const std::string& s);

}  // namespace tessera::cli
