// TxnRuns: splitting a batch of independent writes into runs that each fit one Txn
// (Store::MaxTxnOps), for writers that batch only to share commits (the controller's bindings
// and member-reported phases).
#pragma once

#include <cstddef>
#include <vector>

namespace tessera::store {

// `sizes[i]` is the number of operations item i writes. Returns the end (exclusive) of each run
// of consecutive items, in order, such that a run's operations total at most `max_ops` (0 = no
// limit: one run). An item larger than `max_ops` is a run of its own (its Txn fails, and the
// caller handles that as any failed write). Empty `sizes`: no runs.
std::vector<size_t> TxnRuns(const std::vector<size_t>& sizes, size_t max_ops);

}  // namespace tessera::store
