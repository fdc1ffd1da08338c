// Taints and tolerations, with Kubernetes' semantics.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tessera::model {

enum class TaintEffect : uint8_t { kNoSchedule, kPreferNoSchedule, kNoExecute };
absl::string_view TaintEffectName(TaintEffect e);
std::optional<TaintEffect> ParseTaintEffect(absl::string_view s);

struct Taint {
  std::string key;
  std::string value;
  TaintEffect effect = TaintEffect::kNoSchedule;
  friend bool operator==(const Taint&, const Taint&) = default;
};

struct Toleration {
  enum class Op : uint8_t { kEqual, kExists };
  std::string key;  // empty with kExists: tolerates every taint
  Op op = Op::kEqual;
  std::string value;
  std::optional<TaintEffect> effect;  // empty: every effect
  friend bool operator==(const Toleration&, const Toleration&) = default;
};

// True when `t` tolerates `taint` (Kubernetes' ToleratesTaint).
bool Tolerates(const Toleration& t, const Taint& taint);

}  // namespace tessera::model
