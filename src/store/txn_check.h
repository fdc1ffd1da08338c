// Shared Txn validation for Store implementations, so that every backend
// reports CAS mismatches with the same codes and messages.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "store/store.h"

namespace tessera::store {

// Structural checks independent of state: non-empty, non-empty keys, each key
// at most once.
absl::Status ValidateTxnShape(const std::vector<Op>& ops);

// Checks `op` against the key's current state (`current` is null when absent).
//   kPut,  expected 0, key exists       -> AlreadyExists
//   kPut,  expected N>0, key absent     -> NotFound
//   any,   expected N>0, mod_revision!=N -> FailedPrecondition
//   kDelete, key absent                 -> NotFound
absl::Status CheckOp(const Op& op, const KeyValue* current);

}  // namespace tessera::store
