// DeviceSelector: the subset of CEL that Dynamic Resource Allocation's device selectors use
// (DeviceClass.spec.selectors[].cel.expression, a claim request's selectors), evaluated against
// one device of a ResourceSlice.
//
// Supported (what the shipped DeviceClasses and common claims use):
//   - `device.driver`, `device.attributes["DOMAIN"].NAME` (or `["NAME"]`), and
//     `device.capacity["DOMAIN"].NAME`; `"NAME" in device.attributes["DOMAIN"]`;
//   - literals: strings ('..' or ".."), integers, doubles, true, false, null, lists [a, b];
//   - `&&`, `||` (with CEL's error absorption: `false && <error>` is false), `!`, unary `-`,
//     parentheses, `==`, `!=`, `<`, `<=`, `>`, `>=` on numbers and strings (== also on bools,
//     versions and quantities), `x in [list]`;
//   - `quantity("40Gi")` and `semver("1.2.3")` with `.compareTo(y)`, `.isGreaterThan(y)`,
//     `.isLessThan(y)`; string `.startsWith`, `.endsWith`, `.contains`; `size(x)` / `x.size()`.
// Anything else (macros such as `.all()`, regular expressions, other functions) is refused when
// parsed, with InvalidArgument naming the expression and what is not supported, so that a claim
// asking for it waits with that message instead of being placed by a guess.
//
// Evaluation follows CEL: a missing attribute or a type mismatch is an error (the device does not
// match; the error says why), unless `&&`/`||` absorb it.
//
// Thread safety: a parsed DeviceSelector is immutable and may be evaluated from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace tessera::kube {

struct CelValue {
  enum class Type { kNull, kBool, kInt, kDouble, kString, kVersion, kQuantity, kList, kMap };
  Type type = Type::kNull;
  bool b = false;
  int64_t i = 0;                 // kInt; kQuantity: milli-units
  double d = 0;                  // kDouble
  std::string s;                 // kString; kVersion: as written
  std::vector<int64_t> version;  // kVersion: major, minor, patch
  std::string prerelease;        // kVersion
  std::shared_ptr<const std::vector<CelValue>> list;
  std::shared_ptr<const std::map<std::string, CelValue>> map;

  static CelValue Bool(bool v);
  static CelValue Int(int64_t v);
  static CelValue String(std::string v);
  static CelValue Map(std::map<std::string, CelValue> m);
};

// `device` as CEL sees a ResourceSlice device (resource.k8s.io/v1 `spec.devices[]`) published by
// `driver`: attributes by domain (unqualified names are the driver's) with their typed values
// (`string`, `int`, `bool`, `version`), capacities as quantities. Attributes whose value is not
// one of those, or a capacity that is not a quantity, are left out.
CelValue DeviceValue(const std::string& driver, const nlohmann::json& device);

class DeviceSelector {
 public:
  // Parses `expression`; InvalidArgument naming it and what is wrong or not supported.
  static absl::StatusOr<DeviceSelector> Parse(std::string_view expression);

  // Whether `device` (from DeviceValue) is selected: the expression must be a bool. An
  // evaluation error is returned as InvalidArgument naming the expression and the cause.
  absl::StatusOr<bool> Matches(const CelValue& device) const;

  const std::string& expression() const { return expression_; }

  struct Node;

 private:
  std::string expression_;
  std::shared_ptr<const Node> root_;
};

}  // namespace tessera::kube
