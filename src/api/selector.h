// Label and field selectors, as in Kubernetes list/watch requests.
//
// Label selector: comma-separated requirements, all of which must hold:
//   key=value, key==value, key!=value, key (exists), !key (does not exist),
//   key in (v1,v2), key notin (v1,v2).
// Field selector: comma-separated `field=value`, `field==value` or
//   `field!=value` over metadata.name, metadata.namespace and status.phase.
// Parsing fails with InvalidArgument naming the bad term. Immutable after
// parsing; Matches() is thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace tessera::api {

class Selector {
 public:
  static absl::StatusOr<Selector> ParseLabels(absl::string_view text);
  static absl::StatusOr<Selector> ParseFields(absl::string_view text);

  // True when the API object `obj` satisfies every requirement.
  bool Matches(const nlohmann::json& obj) const;
  bool empty() const { return reqs_.empty(); }

 private:
  enum class Op { kEq, kNotEq, kExists, kNotExists, kIn, kNotIn };
  struct Requirement {
    std::string key;  // label key, or field path
    Op op;
    std::vector<std::string> values;
  };
  bool labels_ = true;
  std::vector<Requirement> reqs_;
};

}  // namespace tessera::api
