#include "model/node_affinity.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::model {
namespace {

bool ParseInt(const std::string& s, int64_t* out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end && !s.empty();
}

bool Matches(const NodeSelectorRequirement& r, const std::string& node_name,
             const std::map<std::string, std::string>& labels) {
  const std::string* value = nullptr;
  if (r.field) {
    if (r.key == "metadata.name") value = &node_name;
  } else if (auto it = labels.find(r.key); it != labels.end()) {
    value = &it->second;
  }
  using Op = NodeSelectorRequirement::Op;
  switch (r.op) {
    case Op::kIn:
      return value != nullptr &&
             std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
    case Op::kNotIn:
      return value == nullptr ||
             std::find(r.values.begin(), r.values.end(), *value) == r.values.end();
    case Op::kExists:
      return value != nullptr;
    case Op::kDoesNotExist:
      return value == nullptr;
    case Op::kGt:
    case Op::kLt: {
      int64_t have = 0, bound = 0;
      if (value == nullptr || r.values.size() != 1 || !ParseInt(*value, &have) ||
          !ParseInt(r.values[0], &bound)) {
        return false;
      }
      return r.op == Op::kGt ? have > bound : have < bound;
    }
  }
  return false;
}

}  // namespace

bool ParseNodeSelectorOp(const std::string& s, NodeSelectorRequirement::Op* out) {
  using Op = NodeSelectorRequirement::Op;
  static constexpr std::pair<const char*, Op> kOps[] = {
      {"In", Op::kIn},         {"NotIn", Op::kNotIn},
      {"Exists", Op::kExists}, {"DoesNotExist", Op::kDoesNotExist},
      {"Gt", Op::kGt},         {"Lt", Op::kLt}};
  for (const auto& [name, op] : kOps) {
    if (s == name) {
      *out = op;
      return true;
    }
  }
  return false;
}

bool MatchesNodeAffinity(const std::vector<NodeSelectorTerm>& terms, const std::string& node_name,
                         const std::map<std::string, std::string>& labels) {
  if (terms.empty()) return true;
  for (const NodeSelectorTerm& t : terms) {
    if (t.requirements.empty()) continue;
    bool all = true;
    for (const NodeSelectorRequirement& r : t.requirements) {
      if (!Matches(r, node_name, labels)) {
        all = false;
        break;
      }
    }
    if (all) return true;
  }
  return false;
}

absl::Status ValidateNodeAffinity(const std::vector<NodeSelectorTerm>& terms,
                                  const std::string& field) {
  using Op = NodeSelectorRequirement::Op;
  std::vector<std::string> errs;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (size_t j = 0; j < terms[i].requirements.size(); ++j) {
      const NodeSelectorRequirement& r = terms[i].requirements[j];
      std::string at = absl::StrCat(field, "[", i, "].requirements[", j, "]");
      if (r.key.empty()) errs.push_back(at + ".key: must not be empty");
      switch (r.op) {
        case Op::kIn:
        case Op::kNotIn:
          if (r.values.empty()) errs.push_back(at + ".values: must be non-empty for In and NotIn");
          break;
        case Op::kExists:
        case Op::kDoesNotExist:
          if (!r.values.empty()) {
            errs.push_back(at + ".values: must be empty for Exists and DoesNotExist");
          }
          break;
        case Op::kGt:
        case Op::kLt: {
          int64_t v = 0;
          if (r.values.size() != 1 || !ParseInt(r.values[0], &v)) {
            errs.push_back(at + ".values: must be one integer for Gt and Lt");
          }
          break;
        }
      }
      if (r.field && (r.key != "metadata.name" || (r.op != Op::kIn && r.op != Op::kNotIn))) {
        errs.push_back(at + ": a field requirement supports only metadata.name with In or NotIn");
      }
    }
  }
  if (errs.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errs, "; "));
}

}  // namespace tessera::model
