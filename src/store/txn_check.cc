#include "store/txn_check.h"

#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace tessera::store {

absl::Status ValidateTxnShape(const std::vector<Op>& ops) {
  if (ops.empty()) return absl::InvalidArgumentError("txn: no operations");
  std::set<std::string_view> seen;
  for (const Op& op : ops) {
    if (op.key.empty()) return absl::InvalidArgumentError("txn: empty key");
    if (op.expected_revision < kAnyRevision) {
      return absl::InvalidArgumentError(
          absl::StrCat("txn: key ", op.key, ": invalid expected_revision ", op.expected_revision));
    }
    if (!seen.insert(op.key).second) {
      return absl::InvalidArgumentError(absl::StrCat("txn: key ", op.key, " appears twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOp(const Op& op, const KeyValue* current) {
  if (op.expected_revision == kMustNotExist) {
    if (current != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat("key ", op.key, " already exists (mod_revision ",
                                                   current->mod_revision, ")"));
    }
    if (op.kind == Op::Kind::kDelete) {
      return absl::NotFoundError(absl::StrCat("key ", op.key, " not found"));
    }
    return absl::OkStatus();
  }
  if (current == nullptr) {
    if (op.kind == Op::Kind::kDelete || op.expected_revision > 0) {
      return absl::NotFoundError(absl::StrCat("key ", op.key, " not found"));
    }
    return absl::OkStatus();
  }
  if (op.expected_revision > 0 && current->mod_revision != op.expected_revision) {
    return absl::FailedPreconditionError(
        absl::StrCat("key ", op.key, ": revision mismatch: mod_revision is ", current->mod_revision,
                     ", expected ", op.expected_revision));
  }
  return absl::OkStatus();
}

}  // namespace tessera::store
