// Quantity: Kubernetes' resource.Quantity ("500m", "2", "1.5Gi", "1e3"), as the text the API gave
// and its value in milli-units, which is what a scheduler adds and compares.
//
// Grammar (k8s.io/apimachinery/pkg/api/resource): a signed decimal number, then a binary SI suffix
// (Ki Mi Gi Ti Pi Ei), a decimal SI suffix (n u m "" k M G T P E) or a decimal exponent (e3, E-2).
// Like Quantity.MilliValue(), a value with more precision than a milli-unit is rounded up
// (0.1m -> 1m): a request never shrinks by rounding.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::kube {

struct Quantity {
  std::string text;   // as written (re-encoded verbatim)
  int64_t milli = 0;  // value * 1000, rounded up

  // Whole units, rounded up ("100m" -> 1), as Quantity.Value().
  int64_t Value() const { return milli >= 0 ? (milli + 999) / 1000 : -((-milli) / 1000); }
  bool operator==(const Quantity& o) const { return milli == o.milli; }
};

// InvalidArgument naming the text when it is not a quantity, OutOfRange when its milli-value does
// not fit in 64 bits.
absl::StatusOr<Quantity> ParseQuantity(absl::string_view text);

// A quantity of whole units ("4") or of milli-units ("250m") for objects this code writes.
Quantity UnitsQuantity(int64_t units);
Quantity MilliQuantity(int64_t milli);

// Resource name ("cpu", "memory", "nvidia.com/gpu") -> quantity.
using ResourceList = std::map<std::string, Quantity>;

}  // namespace tessera::kube
